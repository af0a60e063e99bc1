"""Shared test set-up: quiet TensorFlow, graphs traced here left unoptimized, deterministic
seeds, and the data location."""
import contextlib
import gc
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from transformer_tf.runtime.cpu import prefer_onednn_for_training  # noqa: E402  (no TensorFlow)

# The kernels the training commands choose (oneDNN on AVX2 x86 CPUs, cpu.py), chosen before
# TensorFlow loads: the tests run the kernels a user's training runs, and the commands the
# tests start in subprocesses inherit the choice, so in-process and subprocess runs compare
# alike (weight for weight, with Grappler on for both: `optimized_graphs` below).
prefer_onednn_for_training()

import pytest  # noqa: E402


def pytest_configure(config):
    """TensorFlow's set-up for the tests, in every process that runs tests (a test worker,
    or pytest alone), before any test module is imported. Not in pytest-xdist's controller,
    which only hands modules to its workers: it never loads TensorFlow (pytest held back
    TensorFlow's start-up lines there and printed them below the summary). The start-up
    lines of the processes that do load it are dropped as a command's quiet console
    drops them (`runtime.console.StderrFilter`, at the TF_CPP_MIN_LOG_LEVEL in force: 0
    shows them); every other line passes."""
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None):
        return
    from transformer_tf.runtime.console import LEVEL_VARIABLE, StderrFilter, level_in_force

    start_up_lines = StderrFilter(level_in_force(os.environ[LEVEL_VARIABLE]))
    try:
        _set_up_tensorflow()
    finally:
        start_up_lines.close()


def _set_up_tensorflow():
    import tensorflow as tf

    from transformer_tf.training.distribution import split_cpu

    # Two logical CPU devices, so that tests can run MirroredStrategy with 2 replicas in
    # this process (tests/training/test_replicas.py). This runs before any test module is
    # imported, i.e. before TensorFlow initialises its devices; the default strategy still
    # uses /cpu:0 only. If TF was initialised earlier (a plugin?), the split is skipped and
    # the tests that need two devices run themselves in a subprocess instead.
    try:
        split_cpu(2)
    except RuntimeError:
        pass

    # The functions traced in this process run without Grappler, TensorFlow's graph
    # optimizer (it fuses, folds and prunes; it never changes what a graph computes, only
    # its rounding): optimizing each of the many small functions the tests trace, used a
    # few times each, took about a sixth of their CPU time. What users run keeps it: every
    # command the tests start in a subprocess (the main job, the scripts, fresh-process
    # loads of exports) runs with TensorFlow's defaults, and a run compared weight for
    # weight with one of those is trained with them (`optimized_graphs`).
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})


@contextlib.contextmanager
def _optimized_graphs():
    import tensorflow as tf

    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})


@pytest.fixture(scope="session")
def optimized_graphs():
    """A context manager: the functions first called inside it are optimized by Grappler, as
    in a command the tests run in a subprocess (a 200-step run's weights move apart from
    the same run's without it, by far more than a tolerance would allow)."""
    return _optimized_graphs


REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _seed_and_policy():
    import keras

    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.fixture(scope="session")
def setup_metadata(tmp_path_factory) -> pathlib.Path:
    """The .egg-info directory of this checkout's setup.py (`setup.py egg_info`): the
    metadata pip installs (requirements, extras, entry points), whichever checkout the
    venv's own install points at."""
    import subprocess
    import sys

    base = tmp_path_factory.mktemp("egg")
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(base)],
                   cwd=REPO_ROOT, check=True, capture_output=True, timeout=120)
    return base / "transformer_tf.egg-info"


@pytest.fixture(scope="session")
def shared_data_dir() -> pathlib.Path:
    """$TRANSFORMER_TF_DATA, else ../shared/data next to the repository; skip if absent."""
    path = pathlib.Path(os.environ.get("TRANSFORMER_TF_DATA", REPO_ROOT.parent / "shared" / "data"))
    if not (path / "multi30k").is_dir():
        pytest.skip(f"Multi30k not found under {path} (set TRANSFORMER_TF_DATA)")
    return path


TINY_MULTI30K_PAIRS = {"train": 500, "valid": 40}
TINY_MULTI30K_VOCAB = 500  # the smallest round size above the 256 byte pieces + characters


@pytest.fixture(scope="session")
def tiny_multi30k(shared_data_dir, tmp_path_factory):
    """A prepared en-de directory (PreparedData) over the first 500 training and 40 valid
    pairs of Multi30k, BPE vocabulary 500, training pairs longer than 64 tokens dropped.
    Built once per session (about a second); for the training tests."""
    import gzip
    import itertools

    from transformer_tf.data import bpe
    from transformer_tf.data.corpora import text_file_corpus
    from transformer_tf.data.prepared_writer import prepare_corpus

    raw = tmp_path_factory.mktemp("tiny_multi30k_text")
    files = {}
    for split, stem in (("train", "train"), ("valid", "val")):
        pair = []
        for language in ("en", "de"):
            with gzip.open(shared_data_dir / "multi30k" / f"{stem}.{language}.gz", "rt",
                           encoding="utf-8") as handle:
                lines = list(itertools.islice(handle, TINY_MULTI30K_PAIRS[split]))
            path = raw / f"{split}.{language}"
            path.write_text("".join(lines), encoding="utf-8")
            pair.append(path)
        files[split] = tuple(pair)
    corpus = text_file_corpus("en", "de", **files, name="multi30k-tiny")
    return prepare_corpus(corpus, tmp_path_factory.mktemp("tiny_multi30k"),
                          bpe.BpeOptions(vocab_size=TINY_MULTI30K_VOCAB), max_length=64)


_frozen_depth = [0]


@contextlib.contextmanager
def _objects_so_far_not_collected():
    """gc.freeze for the block; nested blocks leave the outer freeze alone (gc.unfreeze
    would release everything)."""
    _frozen_depth[0] += 1
    if _frozen_depth[0] == 1:
        gc.freeze()
    try:
        yield
    finally:
        _frozen_depth[0] -= 1
        if _frozen_depth[0] == 0:
            gc.unfreeze()


@pytest.fixture(autouse=True)
def _earlier_objects_not_rescanned():
    """Every test runs with the objects earlier tests left alive frozen (`gc_frozen`):
    late in a worker's session, rescanning them made tests that build models up to a
    hundred times slower (287 s instead of 1.6 s measured for one)."""
    with _objects_so_far_not_collected():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """Every fixture is built with the objects that exist before it frozen, as tests run
    (`_earlier_objects_not_rescanned` covers only what runs after the fixtures a test
    needs): otherwise an export that a fixture builds late in a worker's session takes
    minutes instead of seconds."""
    with _objects_so_far_not_collected():
        yield


@pytest.fixture(scope="session")
def gc_frozen():
    """A context manager: the objects that exist when it is entered are left out of
    garbage collection until it exits (`gc.freeze`).

    A test process accumulates hundreds of thousands of long-lived objects: TensorFlow
    keeps every graph traced with a `tf.custom_gradient` alive in its global gradient
    registry (an all-reduce in a replica context is one, so every step function traced
    under MirroredStrategy stays). Scanning them over and over made an in-process
    training run up to ten times slower late in a session. Wrap such runs in it.
    """
    return _objects_so_far_not_collected


@pytest.fixture(scope="session")
def random_weights_run(tiny_multi30k, tmp_path_factory):
    """A model directory: run config, the tiny Multi30k BPE model and random weights of a
    2-layer, 2-head Transformer (as its averaged checkpoint); for tests of what reads a
    model's attention."""
    import tensorflow as tf

    from transformer_tf.config import DecodingConfig, ModelConfig, TrainingConfig
    from transformer_tf.models.transformer import Transformer
    from transformer_tf.rundir import model_dir as model_dir_lib

    directory = tmp_path_factory.mktemp("attention_run")
    config = ModelConfig(vocab_size=tiny_multi30k.vocab_size, num_layers=2, d_model=16,
                         d_ff=32, num_heads=2, max_position=64)
    model_dir_lib.write_run_config(directory, model_dir_lib.RunConfig(
        model=config, training=TrainingConfig(),
        decoding=DecodingConfig(beam_size=2, max_extra_length=3),  # short random outputs
        data_dir=str(tiny_multi30k.directory), preset="tiny"))
    model_dir_lib.write_tokenizer(directory, tiny_multi30k.bpe_model_path)
    model = Transformer(config)
    model.build()
    tf.train.Checkpoint(model=model).write(str(model_dir_lib.averaged_prefix(directory)))
    return directory


@pytest.fixture(scope="session")
def write_checkpointed_run():
    """A function (directory, model_config, steps, average_last) -> directory that writes a
    run directory (run_config.json) with training checkpoints ckpt-<step> for each of
    `steps`, of model and Adam state, each with different random weights (seeded)."""
    import numpy as np

    from transformer_tf.config import DecodingConfig, TrainingConfig
    from transformer_tf.rundir import checkpoints, model_dir as model_dir_lib
    from transformer_tf.training.fit import build_model_and_optimizer

    def write(directory, model_config, steps, average_last):
        training = TrainingConfig(keep_checkpoints=10, average_last=average_last)
        model_dir_lib.write_run_config(directory, model_dir_lib.RunConfig(
            model=model_config, training=training, decoding=DecodingConfig(),
            data_dir="unused", preset="tiny"))
        model = build_model_and_optimizer(model_config, training)
        manager = checkpoints.make_manager(model.network, model.optimizer, directory,
                                           max_to_keep=10)
        rng = np.random.default_rng(0)
        for step in steps:
            for weight in model.weights:
                weight.assign(rng.normal(size=weight.shape).astype(np.float32))
            model.optimizer.iterations.assign(step)
            manager.save(checkpoint_number=step)
        return directory

    return write


_LOCK_HOLDER = """
import sys, time
from transformer_tf.rundir.lock import RunLock
lock = RunLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(600)
"""


@contextlib.contextmanager
def _lock_held_by_another_process(model_dir):
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", _LOCK_HOLDER, str(model_dir)],
                               stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    try:
        assert process.stdout.readline().strip() == "held"
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


@pytest.fixture(scope="session")
def lock_held_elsewhere():
    """A context manager (model_dir) -> the process that holds MDIR's run lock for the
    block (a real second process: the OS lock is per process); killed at the end."""
    return _lock_held_by_another_process


@pytest.fixture(scope="session")
def built_once_per_session(tmp_path_factory):
    """A function (name, key, build) -> directory: `build(directory)` runs once per test
    session, not once per xdist worker. Under xdist the workers share their session's
    base directory: the first to ask builds `name/key` under a file lock, the others wait
    and use it. `key` must name what the build depends on (e.g. a hash of the weights),
    so that a worker whose inputs differ builds its own. Without xdist it simply builds
    into this session's temporary directory."""
    import filelock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base

    def get(name: str, key: str, build) -> pathlib.Path:
        directory = shared / "built_once" / name / key
        directory.parent.mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(str(directory) + ".lock"):
            done = directory / ".done"
            if not done.exists():
                build(directory)
                done.touch()
        return directory

    return get


class StdinReadByWindows:
    """stdin for the commands that read a window of lines at a time (translate, parse):
    hands out `lines` one at a time, line k (from 0) only once the output of the windows
    of `window` lines before its own is on stdout (`printed`, a StringIO; `per_line`
    output lines per input line), else fails the test; `typed`: stdin is a terminal."""

    def __init__(self, lines, printed, window: int = 1, typed: bool = False,
                 per_line: int = 1):
        self.lines, self.printed, self.window = lines, printed, window
        self.typed, self.per_line = typed, per_line

    def isatty(self):
        return self.typed

    @property
    def buffer(self):
        for number, line in enumerate(self.lines):
            answered = number // self.window * self.window
            assert self.printed.getvalue().count("\n") == answered * self.per_line, (
                f"line {number + 1} was read before lines 1-{answered} were answered")
            yield (line + "\n").encode("utf-8")


@pytest.fixture(scope="session")
def stdin_read_by_windows():
    """The class `StdinReadByWindows`, for monkeypatching sys.stdin."""
    return StdinReadByWindows


# Modules that take a minute or more in the suite on a 2-core CPU, longest first (each
# module's first-to-last test time in a `make test` run, with the two others alongside).
# They are handed out first, so that the suite does not end with one worker alone on a
# long module; the other modules keep their order, and so does every module's own tests.
# pytest-xdist's --dist loadscope hands out whole modules in collection order only with
# --no-loadscope-reorder (the Makefile's); by default it hands out first the modules with
# the most tests, and the long modules of a few tests each came last.
LONG_MODULES = (
    "tests/decoding/test_search_by_length.py",
    "tests/export/test_export.py",
    "tests/inference/test_parser.py",
    "tests/training/test_training_run.py",
    "tests/export/test_fuzz_variants.py",
    "tests/jobs/test_main_job.py",
    "tests/training/test_replicas.py",
    "tests/data/test_prepared_writer.py",
    "tests/export/test_bfloat16_export.py",
    "tests/jobs/test_parse_job.py",
    "tests/models/test_fast_paths.py",
    "tests/training/test_keep_best.py",
    "tests/rundir/test_run_directory_rules.py",
    "tests/models/test_transformer.py",
    "tests/jobs/test_killed_jobs.py",
    "tests/training/test_batch_by_precision.py",
    "tests/export/test_max_batch_rows.py",
    "tests/inference/test_selection.py",
    "tests/export/test_kill_export.py",
    "tests/training/test_multiworker.py",
)


def pytest_collection_modifyitems(config, items):
    first = {module: rank for rank, module in enumerate(LONG_MODULES)}
    items.sort(key=lambda item: first.get(item.nodeid.split("::")[0], len(first)))
