"""The run directory's format, read and written by training, inference and export alike:
its run configuration and tokenizer (model_dir.py), checkpoints (checkpoints.py), the
checkpoint a choice kept (model_dir.py) and the lock of its one writer (lock.py)."""
