"""The run directory's format, read and written by training, inference and export alike:
its run configuration and tokenizer (model_dir.py), checkpoints (checkpoints.py), the
best checkpoint by dev BLEU (best_checkpoint.py), the validation log (validation_log.py),
the checkpoint and search settings a choice kept (model_dir.py) and the lock of its one
writer (lock.py)."""
