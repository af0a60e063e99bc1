"""Shared test set-up: quiet TensorFlow, deterministic seeds, and the data location."""
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402

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
