"""Shared test set-up: quiet TensorFlow, deterministic seeds, and the data location."""
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402

from transformer_tf.training.distribution import split_cpu  # noqa: E402

# Two logical CPU devices, so that tests can run MirroredStrategy with 2 replicas in this
# process (tests/training/test_replicas.py). pytest imports this file before any test
# module, i.e. before TensorFlow initialises its devices; the default strategy still uses
# /cpu:0 only. If TF was initialised earlier (a plugin?), the split is skipped and the
# tests that need two devices run themselves in a subprocess instead.
try:
    split_cpu(2)
except RuntimeError:
    pass

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _seed_and_policy():
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.fixture(scope="session")
def shared_data_dir() -> pathlib.Path:
    """$TRANSFORMER_TF_DATA, else ../shared/data next to the repository; skip if absent."""
    path = pathlib.Path(os.environ.get("TRANSFORMER_TF_DATA", REPO_ROOT.parent / "shared" / "data"))
    if not (path / "multi30k").is_dir():
        pytest.skip(f"Multi30k not found under {path} (set TRANSFORMER_TF_DATA)")
    return path
