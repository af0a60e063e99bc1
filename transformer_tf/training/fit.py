"""The training driver behind scripts/train.py: build, restore, `model.fit`, checkpoint.

A run is measured in optimizer steps. `fit` runs "epochs" of `eval_every` steps over a
repeated, seeded dataset; after each one it computes the validation loss (and, when a
validation callback is given, BLEU on a dev subset; both go to the run's validation log,
the best checkpoint by BLEU is kept apart, and early stopping may end the run:
keep_best.py). A killed run restarts from its last checkpoint: same step count and
optimizer state, and the same data position (the seeded dataset is replayed and the
batches already consumed are skipped); it validates at the steps an uninterrupted run
does, the multiples of `eval_every` (`fit_on_the_validation_grid`). A run stopped with
SIGTERM or Ctrl-C saves the step it is on first (`stop_signal`).

Fine-tuning (`TrainOptions.init_from`): a new run starts from another run's checkpoint
with a fresh optimizer, schedule and step count (`rundir.init_source`).

Out of memory: when a training batch does not fit (tf.errors.ResourceExhaustedError),
the current state is saved as a checkpoint, the token budget is halved (not below the
smallest one that holds a longest sentence per replica; `rundir.batch_budget` records it)
and the run resumes from that checkpoint with batches built for the new budget.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import pathlib
import time
from typing import NamedTuple

import keras
import tensorflow as tf

from transformer_tf.config import RECIPES, ConfigError, TrainingConfig
from transformer_tf.data.bucketing import smallest_budget
from transformer_tf.data.datasets import make_evaluation_dataset, make_training_dataset
from transformer_tf.data.prepared_reader import load_prepared
from transformer_tf.data.transforms import DropCounter
from transformer_tf.evaluation.hypothesis_files import read_lines
from transformer_tf.models.registry import DEFAULT_FAMILY, build_model
from transformer_tf.presets import get_preset
from transformer_tf.rundir import batch_budget, checkpoints, init_source
from transformer_tf.rundir import model_dir as model_dir_lib
from transformer_tf.rundir.lock import hold_run
from transformer_tf.runtime import console, error_text
from transformer_tf.training import callbacks as callbacks_lib
from transformer_tf.training import recipe_plan
from transformer_tf.training.accumulation import pack_micro_batches
from transformer_tf.training.distribution import (
    is_chief,
    is_multi_worker,
    make_strategy,
)
from transformer_tf.training.keep_best import EarlyStopping, KeepBest
from transformer_tf.training.optimizer import FusedAdam
from transformer_tf.training.plateau import (
    ShrinkOnPlateau,
    compiled_loss_sums,
    mean_dev_nll,
)
from transformer_tf.training.precision import resolve_precision
from transformer_tf.training.schedule import TransformerSchedule, WarmupHoldCooldown
from transformer_tf.training.speed_probe import probe_speed
from transformer_tf.training.stop_signal import StopOnSignal, StopRequested
from transformer_tf.training.trainer import Seq2SeqTrainer
from transformer_tf.training.validation import ValidationTranslations
from transformer_tf.training.word_loss import pooled_ids

logger = logging.getLogger(__name__)



class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message gives the step."""


class _BudgetLowered(Exception):
    """Control flow of `train`: a batch did not fit, the state was saved and the run
    goes on from it with `options` (a lower token budget)."""

    def __init__(self, options: TrainOptions):
        super().__init__()
        self.options = options


def run_fit(model, *args, **kwargs):
    """`model.fit(*args, **kwargs)`: the one call that trains (tests replace it to inject
    allocator failures)."""
    return model.fit(*args, **kwargs)


def fit_on_the_validation_grid(model, train_data, start_step: int, planned_steps: int,
                               eval_every: int, **fit_arguments) -> None:
    """`model.fit` in "epochs" of `eval_every` steps that end on multiples of eval_every,
    each followed by the validation, up to `planned_steps` (the callbacks' StopAtStep ends
    the run there; one epoch more than planned leaves room for steps that loss scaling
    skips).

    A run resumed between two multiples first trains up to the next one, in a fit of its
    own, so that it validates (and its curves have points) at the steps an uninterrupted
    run does. `train_data()` gives the training stream from the current data position;
    each fit reads a new one.
    """
    epoch, short = start_step // eval_every, -start_step % eval_every
    if short:
        run_fit(model, train_data(), epochs=epoch + 1, initial_epoch=epoch,
                steps_per_epoch=short, **fit_arguments)
        if model.stop_training:  # a callback ended the run (planned step, time, NaN, ...)
            return
        epoch += 1
    run_fit(model, train_data(), epochs=math.ceil(planned_steps / eval_every) + 1,
            initial_epoch=epoch, steps_per_epoch=eval_every, **fit_arguments)


@dataclasses.dataclass
class TrainOptions:
    """What scripts/train.py passes to `train` (see its --help for each field).

    Exactly one of max_steps / epochs / max_minutes is the plan; max_minutes may also
    cap a step or epoch plan. All three count the whole run, not one invocation: a
    resumed run trains up to max_steps steps, epochs epochs and max_minutes minutes of
    training in all (the training time is saved with every checkpoint), so a killed run
    continues where it stopped and a finished one trains no further.
    """

    data_dir: str
    model_dir: str
    preset: str = "multi30k"
    model_overrides: dict = dataclasses.field(default_factory=dict)
    training_overrides: dict = dataclasses.field(default_factory=dict)
    decoding_overrides: dict = dataclasses.field(default_factory=dict)
    max_steps: int | None = None
    epochs: float | None = None
    max_minutes: float | None = None
    eval_every: int = 1000
    log_every: int = 100
    strategy: str = "default"
    devices: list | None = None
    precision: str = "auto"
    jit_compile: bool = False
    validation_sentences: int = 200
    early_stopping: int | None = None  # patience in evaluations (None: train to the plan)
    verbose: int = 1
    # Fine-tuning: the checkpoint prefix (of another run's directory) a NEW run starts
    # from; its model must be this run's (same family, model fields and tokenizer).
    init_from: str | None = None
    # "preset": train with the configs as given; "planned": the budget-aware recipe
    # (training/recipe_plan.py) plans what the user did not set. A run that has a plan
    # keeps it when resumed, whatever `recipe` says.
    recipe: str = "preset"
    probe_seconds: float = 45.0  # the speed probe of a planned run with a time budget alone



@dataclasses.dataclass
class TrainResult:
    model_dir: str
    logdir: str
    step: int
    planned_steps: int
    last_checkpoint: str | None
    # "steps", "time", "early_stopping" (dev BLEU stopped improving), "plateau" (learning
    # rate below its minimum)
    stopped_by: str
    seconds: float
    start_step: int = 0  # the checkpoint step this run resumed from (0: a fresh start)
    precision: str = "float32"  # the dtype policy used
    precision_reason: str = ""
    trained_seconds: float = 0.0  # the run's training time in all, up to its last checkpoint
    init_from: dict | None = None  # a fine-tuned run's origin (rundir.init_source)
    tokens_per_batch: int = 0  # the token budget the run ended with
    recipe_plan: dict | None = None  # the run's RecipePlan (as a dict), if it was planned
    stop_reason: str = ""  # why it stopped, in one line


def _run_config(options: TrainOptions, prepared, precision: str) -> model_dir_lib.RunConfig:
    """The run's configs: the preset's for `precision` (`Preset.training_for`), with the
    options' overrides applied."""
    preset = get_preset(options.preset)
    given = options.model_overrides.get("vocab_size", prepared.vocab_size)
    if given != prepared.vocab_size:
        raise ConfigError(f"model vocab_size {given} differs from the prepared data's "
                          f"{prepared.vocab_size} ({options.data_dir}): the vocabulary size "
                          f"is the data's; drop it or prepare the data with that size")
    model = preset.model.replace(**{**options.model_overrides, "vocab_size": given})
    training = preset.training_for(precision).replace(**options.training_overrides)
    taken = {field: value for field, value in preset.fields_for(precision).items()
             if field not in options.training_overrides}
    if taken:
        logger.info("preset %r in %s: %s (in float32: %s)", options.preset, precision,
                    ", ".join(f"{field}={value}" for field, value in taken.items()),
                    ", ".join(f"{field}={getattr(preset.training, field)}" for field in taken))
    return model_dir_lib.RunConfig(
        model=model.resolved(), training=training,
        decoding=preset.decoding.replace(**options.decoding_overrides),
        data_dir=str(pathlib.Path(options.data_dir).resolve()), preset=options.preset,
        family=preset.family, source_language=prepared.source_language,
        target_language=prepared.target_language,
        tokenizer_sha256=model_dir_lib.tokenizer_sha256(prepared.bpe_model_path.read_bytes()))


# The settings a resumed run keeps from its run_config.json, unless the user gives them:
# where its preset's value changed since (`parsing` used the tree grammar before it named
# the paper's parser) or is another at this run's precision (`Preset.training_for`), the
# run goes on with the batches it trained on, segmented as they were (BPE-dropout), and
# decodes as it did.
KEPT_ON_RESUME = (("training", "tokens_per_batch"), ("training", "bpe_dropout"),
                  ("decoding", "grammar"))


def _keep_recorded_settings(run, options: TrainOptions, model_dir) -> model_dir_lib.RunConfig:
    """`run` with the `KEPT_ON_RESUME` settings of the run MDIR recorded, if it has one."""
    if not (pathlib.Path(model_dir) / model_dir_lib.RUN_CONFIG).exists():
        return run
    recorded = model_dir_lib.read_run_config(model_dir)
    given = {"training": options.training_overrides, "decoding": options.decoding_overrides}
    for section, field in KEPT_ON_RESUME:
        config = getattr(run, section)
        value, preset_value = getattr(getattr(recorded, section), field), getattr(config, field)
        if field in given[section] or value == preset_value:
            continue
        logger.info("%s keeps its recorded %s %r (its preset's here: %r)", model_dir, field,
                    value, preset_value)
        run = dataclasses.replace(run, **{section: config.replace(**{field: value})})
    return run


def make_optimizer(training: TrainingConfig, model_width: int,
                   time_factor=None) -> keras.optimizers.Optimizer:
    """The optimizer `training.optimizer` names: "adam", the paper's Adam with the warm-up
    schedule `training.lr_schedule` names, over `model_width` (d_model); "nesterov",
    ConvS2S's SGD with Nesterov momentum at a learning rate that `plateau.ShrinkOnPlateau`
    lowers. Both clip the global gradient norm at `training.clip_norm` (if set).
    `time_factor`: the variable a time-clocked "warmup_hold_cooldown" rate reads
    (callbacks.TimeCooldown sets it)."""
    if training.optimizer == "nesterov":
        return keras.optimizers.SGD(
            learning_rate=training.learning_rate, momentum=training.momentum, nesterov=True,
            global_clipnorm=training.clip_norm)
    if training.lr_schedule == "warmup_hold_cooldown":
        schedule = WarmupHoldCooldown(
            d_model=model_width, warmup_steps=training.warmup_steps,
            scale=training.learning_rate_scale, schedule_steps=training.schedule_steps,
            cooldown_steps=training.cooldown_steps, time_factor=time_factor)
    else:
        schedule = TransformerSchedule(d_model=model_width, warmup_steps=training.warmup_steps,
                                       scale=training.learning_rate_scale)
    return FusedAdam(learning_rate=schedule, beta_1=training.adam_beta_1,
                     beta_2=training.adam_beta_2, epsilon=training.adam_epsilon,
                     global_clipnorm=training.clip_norm)


def build_model_and_optimizer(model_config, training: TrainingConfig,
                              jit_compile: bool = False,
                              family: str = DEFAULT_FAMILY,
                              pooled=None, time_factor=None) -> Seq2SeqTrainer:
    """A compiled `Seq2SeqTrainer` over a new model of `family` (`model_config` its config
    dataclass), with the optimizer of `make_optimizer` and the training config's label
    smoothing, variables created. The model itself is `trainer.network`. `pooled`: the
    ids the loss scores as one class (`word_loss.pooled_ids`), or None. `time_factor`: as
    `make_optimizer`'s.

    Call under the strategy's scope. Under a mixed_float16 global policy `compile` wraps
    the optimizer in a LossScaleOptimizer (dynamic loss scaling).
    """
    model = Seq2SeqTrainer(build_model(family, model_config),
                           label_smoothing=training.label_smoothing,
                           accumulation_steps=training.gradient_accumulation_steps,
                           pooled_ids=pooled)
    model.build()
    # Gradient accumulation happens in the trainer's step (one optimizer call per update).
    model.compile(optimizer=make_optimizer(training, model.network.model_width, time_factor),
                  jit_compile=jit_compile)
    model.optimizer.build(model.trainable_variables)
    return model


def _validation_translations(network, prepared, num_sentences: int, monitor):
    """Greedy BLEU and example translations on the first `num_sentences` dev pairs."""
    files = prepared.files("valid")
    sources = read_lines(files.source)[:num_sentences]
    references = read_lines(files.target)[:num_sentences]
    return ValidationTranslations(network, prepared.tokenizer, sources, references, monitor)


def checkpoint_period(training: TrainingConfig, options: TrainOptions) -> float:
    """Minutes between checkpoints: the config's, or shorter for a run planned by time
    alone, so that `average_last` checkpoints fall in the final part of training that
    averaging draws from (`recipe_plan.checkpoint_minutes`)."""
    period = training.checkpoint_every_minutes
    if options.max_minutes is not None and options.max_steps is None and options.epochs is None:
        period = recipe_plan.checkpoint_minutes(period, options.max_minutes,
                                                training.average_last)
    return period


def count_batches(dataset: tf.data.Dataset) -> int:
    """Batches in one pass of a finite dataset (runs the input pipeline once)."""
    return int(dataset.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1).numpy())


def train(options: TrainOptions) -> TrainResult:
    """Train (or resume, or fine-tune) the run in `options.model_dir`; returns where it
    stopped.

    The chief holds MDIR's `RunLock` while it trains: another run there raises
    `rundir.lock.RunLockedError` at once. A batch that does not fit in memory lowers the
    token budget and training goes on (module docstring); below the smallest budget it
    raises tf.errors.ResourceExhaustedError with a message saying what to change."""
    with contextlib.ExitStack() as held_until_the_end:
        while True:
            try:
                return _train(options, held_until_the_end)
            except _BudgetLowered as lowered:  # the lock stays held (hold_run nests)
                options = lowered.options


def _with_recorded_budget(run, options: TrainOptions, model_dir):
    """`run` with the token budget MDIR lowered earlier, unless `options` set one."""
    record = batch_budget.read_budget(model_dir)
    if record is None or "tokens_per_batch" in options.training_overrides:
        return run
    logger.warning("tokens_per_batch %d instead of %d: the run lowered it when a batch did "
                   "not fit in memory (%s)", record["tokens_per_batch"],
                   run.training.tokens_per_batch, batch_budget.budget_path(model_dir))
    return dataclasses.replace(
        run, training=run.training.replace(tokens_per_batch=int(record["tokens_per_batch"])))


def _init_source(options: TrainOptions, model_dir, run, prepared):
    """The checkpoint this run starts from (`init_source.InitSource`), or None: the one
    `options.init_from` names (checked against the run: same model and tokenizer), else
    the one a fine-tuned run recorded, if it has no checkpoint of its own yet."""
    has_checkpoints = bool(checkpoints.checkpoints_on_disk(model_dir))
    if options.init_from is None:
        config_path = pathlib.Path(model_dir) / model_dir_lib.RUN_CONFIG
        recorded = (model_dir_lib.read_run_config(model_dir).init_from
                    if config_path.exists() else None)
        if recorded is None:
            return None
        source = init_source.InitSource.from_config(recorded)
        if not has_checkpoints:
            init_source.check_unchanged(source)
        return source
    if has_checkpoints:
        raise ValueError(f"{model_dir} already has checkpoints: --init-from starts a new run. "
                         "Run without --init-from to resume it, or give a new --model-dir")
    if pathlib.Path(options.init_from).is_dir():
        raise ValueError(f"{options.init_from} is a directory: name a checkpoint prefix "
                         "(the train command picks a run directory's default checkpoint)")
    source = init_source.describe(options.init_from)
    source_run = model_dir_lib.read_run_config(source.model_dir)
    model_dir_lib.check_same_model(
        source_run, run, source.model_dir,
        model_dir_lib.tokenizer_sha256(model_dir_lib.read_tokenizer_proto(source.model_dir)),
        prepared.bpe_model_path)
    return source


def _lower_budget(error, options: TrainOptions, run, model_dir, strategy, step: int,
                  save_state, chief: bool) -> _BudgetLowered:
    """After a batch did not fit in memory at `step`: saves the state (`save_state()`),
    records and logs the halved budget and returns the `_BudgetLowered` to raise; raises
    tf.errors.ResourceExhaustedError when the budget cannot go lower (or with several
    workers, which would have to agree on it)."""
    old = run.training.tokens_per_batch
    floor = smallest_budget(run.training.max_length, strategy.num_replicas_in_sync)
    new = max(old // 2, floor)
    reason = error_text.summary(error)
    if is_multi_worker(strategy):
        raise tf.errors.ResourceExhaustedError(
            None, None, f"a training batch of tokens_per_batch={old} does not fit in memory "
                        f"at step {step} ({reason}); with several workers the budget is not "
                        "lowered automatically: give a smaller --tokens-per-batch")
    if new >= old:
        raise tf.errors.ResourceExhaustedError(
            None, None, f"{model_dir}: a training batch does not fit in memory even with "
                        f"tokens_per_batch={old}, the smallest that holds "
                        f"{strategy.num_replicas_in_sync} sentence(s) of max_length "
                        f"{run.training.max_length} ({reason}); lower max_length "
                        "(--training-option max_length=N), train a smaller model or use a "
                        "device with more memory")
    save_state()
    if chief:
        batch_budget.record_lowered(model_dir, step, old, new, reason)
    logger.warning("a training batch did not fit in memory at step %d (%s): tokens_per_batch "
                   "lowered from %d to %d (recorded in %s); going on from step %d", step,
                   reason, old, new, batch_budget.budget_path(model_dir), step)
    # The run goes on as a resume: a fine-tuned run's origin is in its run_config.json.
    return _BudgetLowered(dataclasses.replace(
        options, training_overrides={**options.training_overrides, "tokens_per_batch": new},
        init_from=None))


def _save_if_started(checkpoint_callback) -> None:
    """A checkpoint of the current state, if `fit` got as far as giving the callback its
    model (else the state is the restored one, already on disk)."""
    if checkpoint_callback.model is not None:
        checkpoint_callback.on_train_end()


def _train(options: TrainOptions, held_until_the_end: contextlib.ExitStack) -> TrainResult:
    precision, precision_reason = resolve_precision(options.precision)
    plans = [x for x in (options.max_steps, options.epochs) if x is not None]
    if len(plans) > 1:
        raise ValueError("give at most one of max_steps and epochs")
    if options.recipe not in RECIPES:
        raise ValueError(f"recipe: expected one of {RECIPES}, got {options.recipe!r}")
    started = time.monotonic()
    prepared = load_prepared(options.data_dir)
    run = _run_config(options, prepared, precision)
    pooled = pooled_ids(run.training, prepared.bpe_model_path.read_bytes(),
                        run.model.vocab_size, where=f"data directory {options.data_dir}")
    validating = options.validation_sentences > 0 and "valid" in prepared.splits
    if options.early_stopping is not None and not validating:
        raise ValueError("early stopping needs dev BLEU during training: a prepared 'valid' "
                         "split and validation_sentences > 0")
    if not plans and options.max_minutes is None:
        if run.training.train_steps is None:
            raise ValueError(f"give a plan: max_steps, epochs or max_minutes (preset "
                             f"{options.preset!r} has no step plan)")
        options = dataclasses.replace(options, max_steps=run.training.train_steps)
    model_dir = pathlib.Path(options.model_dir)

    keras.mixed_precision.set_global_policy(precision)
    logger.info("precision %s (%s)", precision, precision_reason)
    strategy = make_strategy(options.strategy, options.devices)
    chief = is_chief(strategy)
    if chief:  # the lock first: nothing is read to decide, or written, without it
        held_until_the_end.enter_context(hold_run(model_dir, create=True))
    run = _keep_recorded_settings(run, options, model_dir)
    run = _with_recorded_budget(run, options, model_dir)  # a lowered budget wins
    accumulation = run.training.gradient_accumulation_steps
    if run.training.bpe_dropout:
        logger.info("BPE-dropout %g: each training pair is segmented anew at every pass "
                    "(dev and test as the model segments)", run.training.bpe_dropout)

    def dataset(split, repeat, shuffle, drop_counter=None):
        return make_training_dataset(
            prepared, split, tokens_per_batch=run.training.tokens_per_batch,
            max_length=run.training.max_length, num_replicas=strategy.num_replicas_in_sync,
            shuffle=shuffle, seed=run.training.seed, repeat=repeat, drop_counter=drop_counter,
            bpe_dropout=run.training.bpe_dropout)

    @functools.cache
    def steps_per_pass() -> float:  # counted once, if an epoch plan or a new recipe plan asks
        return count_batches(dataset("train", False, False)) / accumulation

    plan = _recipe_plan(options, run, model_dir, strategy, pooled, dataset, steps_per_pass)
    if plan is not None:
        logger.info("recipe %s", plan.describe())
        model, training = recipe_plan.apply_plan(run.model, run.training, plan)
        run = dataclasses.replace(run, model=model, training=training)
    resuming = model_dir_lib.check_resume_in(model_dir, run)
    source = _init_source(options, model_dir, run, prepared)
    run = dataclasses.replace(run, init_from=source.get_config() if source else None)
    if chief:
        checkpoints.remove_interrupted_saves(model_dir)
        if resuming:
            checkpoints.repair_checkpoint_state(model_dir)
        model_dir_lib.write_run_config(model_dir, run)
        model_dir_lib.write_tokenizer(model_dir, prepared.bpe_model_path)
        if plan is not None:
            model_dir_lib.write_recipe_plan(model_dir, plan.to_dict())
    keras.utils.set_random_seed(run.training.seed)

    timed_cooldown = _time_clocked(run.training)
    check_cooldown_clock(run.training, options.max_minutes, is_multi_worker(strategy))
    with strategy.scope():
        time_factor = (tf.Variable(1.0, trainable=False, name="cooldown_time_factor")
                       if timed_cooldown else None)
        model = build_model_and_optimizer(run.model, run.training, options.jit_compile,
                                          family=run.family, pooled=pooled,
                                          time_factor=time_factor)
    # Every worker restores from MDIR's checkpoints (MDIR must be on a file system the
    # workers share): workers resuming from different states would run different numbers
    # of steps and wait forever for each other. Only the chief writes checkpoints; saving
    # our checkpoints (model and optimizer variables, no sync-on-read ones) involves no
    # collective op, so the other workers need not save anywhere.
    #
    # A step is an optimizer update: `accumulation` batches. The data position is the
    # number of batches consumed, counted and checkpointed (loss scaling may skip steps).
    state = _restore_or_start(model, model_dir, run.training, plan, source)
    start_step = state.start_step

    planned_steps, ends_with_schedule = planned_last_step(options, run.training,
                                                          steps_per_pass)
    # Pairs over run.training.max_length are dropped from training (and counted); the
    # validation loss covers every dev pair, in order (over-long sides truncated).
    drops = DropCounter()

    def train_data_from(position: int):
        """The training stream from data position `position` (batches consumed)."""
        data = dataset("train", True, True, drops).skip(position)
        if accumulation > 1:  # each element: the `accumulation` batches of one update
            data = data.apply(pack_micro_batches(accumulation))
        return data

    validation_data = (make_evaluation_dataset(prepared, "valid",
                                               max_length=run.training.max_length)
                       if "valid" in prepared.splits else None)

    eval_every = max(1, min(options.eval_every, planned_steps))
    logdir = model_dir_lib.logdir(model_dir)
    made = _run_callbacks(options, run, model, prepared, state, strategy, chief, logdir,
                          planned_steps=planned_steps, time_factor=time_factor,
                          validating=validating, validation_data=validation_data,
                          steps_per_pass=steps_per_pass)
    time_budget, early_stopping = made.time_budget, made.early_stopping
    out_of_time = time_budget is not None and state.seconds_before >= time_budget.max_seconds
    stopped_early = early_stopping is not None and early_stopping.exhausted()

    if out_of_time:
        logger.info("the run has trained %.1f of its %g minutes: nothing left to train",
                    state.seconds_before / 60.0, options.max_minutes)
    elif stopped_early:
        logger.info("%s before this invocation: nothing left to train", early_stopping.reason)
    elif start_step < planned_steps:
        try:
            _fit_until_stopped(
                model, lambda: train_data_from(int(state.batches.numpy())), start_step,
                planned_steps, eval_every, validation_data, made,
                verbose=0 if made.own_lines else options.verbose,
                multi_worker=is_multi_worker(strategy))
        except tf.errors.ResourceExhaustedError as error:
            raise _lower_budget(error, options, run, model_dir, strategy,
                                int(model.optimizer.iterations.numpy()),
                                lambda: _save_if_started(made.checkpoint), chief) from None
        finally:
            made.monitor.close()
    if made.nan_stop.nan_step is not None:
        raise TrainingDiverged(
            f"training diverged: the loss became NaN at step {made.nan_stop.nan_step}; the "
            f"last good checkpoint is {state.manager.latest_checkpoint}")
    counts = drops.result()
    logger.info("training batches read: the length filter (max_length %d) dropped %d empty "
                "and %d over-long pairs (counted on every pass over the data)",
                run.training.max_length, counts["empty"], counts["too_long"])
    step = int(model.optimizer.iterations.numpy())
    stopped_early = stopped_early or (early_stopping is not None
                                      and early_stopping.stopped_at_step is not None)
    stopped_by, stop_reason = why_it_stopped(
        out_of_time=out_of_time or (time_budget is not None
                                    and time_budget.stopped_at_step is not None),
        early_stopping_reason=early_stopping.reason if stopped_early else None,
        plateau_finished=state.plateau is not None and state.plateau.finished,
        ends_with_schedule=ends_with_schedule, planned_steps=planned_steps,
        max_minutes=options.max_minutes, min_learning_rate=run.training.min_learning_rate)
    return TrainResult(model_dir=str(model_dir), logdir=str(logdir), step=step,
                       planned_steps=planned_steps,
                       last_checkpoint=state.manager.latest_checkpoint,
                       stopped_by=stopped_by, seconds=time.monotonic() - started,
                       start_step=start_step, precision=precision,
                       precision_reason=precision_reason,
                       trained_seconds=float(state.trained_seconds.numpy()),
                       init_from=run.init_from,
                       tokens_per_batch=run.training.tokens_per_batch,
                       recipe_plan=plan.to_dict() if plan is not None else None,
                       stop_reason=stop_reason)


class _RunState(NamedTuple):
    """What a run restores from its last checkpoint, or starts from: the checkpoint
    manager, the data position (`batches` consumed), the training time so far (seconds,
    the speed probe's included) and the plateau rule (ConvS2S' Nesterov runs, else None)."""
    manager: tf.train.CheckpointManager
    batches: tf.Variable
    trained_seconds: tf.Variable
    plateau: ShrinkOnPlateau | None
    start_step: int
    seconds_before: float


def _restore_or_start(model, model_dir, training: TrainingConfig, plan,
                      source) -> _RunState:
    """Restores the run's newest checkpoint (model, optimizer and counters) if it has
    one; else a new run starts, from `source`'s weights when fine-tuning
    (`init_source.InitSource`, a fresh optimizer) and with the speed probe's seconds of
    the recipe `plan` already counted."""
    accumulation = training.gradient_accumulation_steps
    batches = tf.Variable(0, dtype=tf.int64, trainable=False, name="batches")
    trained_seconds = tf.Variable(0.0, dtype=tf.float64, trainable=False,
                                  name=checkpoints.TRAINED_SECONDS)
    plateau = (ShrinkOnPlateau(training.lr_shrink, training.min_learning_rate)
               if training.optimizer == "nesterov" else None)
    manager = checkpoints.make_manager(
        model.network, model.optimizer, model_dir, training.keep_checkpoints,
        batches=batches, training_state={checkpoints.TRAINED_SECONDS: trained_seconds,
                                         **({"plateau": plateau.best} if plateau else {})})
    start_step = checkpoints.restore_latest(manager)
    # Checkpoints older than the counter hold 0: their position is the steps' batches
    # (set, so that the counter the next checkpoint saves is right too).
    batches.assign(int(batches.numpy()) or start_step * accumulation)
    if not start_step and plan is not None and plan.probe_seconds:
        trained_seconds.assign(plan.probe_seconds)  # the probe is part of the time budget
    seconds_before = float(trained_seconds.numpy())
    if start_step:
        logger.info("resuming from %s at step %d (%.1f min of training so far)",
                    manager.latest_checkpoint, start_step, seconds_before / 60.0)
    elif source is not None:
        checkpoints.load_weights(model.network, source.checkpoint)
        logger.info("fine-tuning from %s (step %s of %s)", source.checkpoint, source.step,
                    source.model_dir)
    return _RunState(manager, batches, trained_seconds, plateau, start_step, seconds_before)


class _Callbacks(NamedTuple):
    """One invocation's Keras callbacks in the order `fit` runs them (`in_order`), and
    those `_train` asks afterwards how the run went; `own_lines`: progress is shown by
    `callbacks.ProgressLines` instead of Keras' bar (a time budget alone, or a console
    that is not a terminal)."""
    in_order: list
    checkpoint: callbacks_lib.PeriodicCheckpoint
    nan_stop: callbacks_lib.StopOnNaN
    monitor: callbacks_lib.TrainingMonitor
    time_budget: callbacks_lib.TimeBudget | None
    early_stopping: EarlyStopping | None
    own_lines: bool


def _run_callbacks(options: TrainOptions, run, model, prepared, state: _RunState, strategy,
                   chief: bool, logdir, *, planned_steps: int, time_factor, validating: bool,
                   validation_data, steps_per_pass) -> _Callbacks:
    """The callbacks of this invocation: divergence and step stops, the time budget and
    its cool-down clock (`time_factor`; None without a time-clocked cool-down),
    TensorBoard, periodic checkpoints, dev BLEU with the best checkpoint kept apart and
    early stopping (when `validating`, on the chief), and ConvS2S' once-a-pass plateau
    rule (`state.plateau`)."""
    multi_worker = is_multi_worker(strategy)
    # Only the chief saves, and saving needs no other worker: it may save at any step.
    checkpoint_callback = callbacks_lib.PeriodicCheckpoint(
        state.manager, checkpoint_period(run.training, options), enabled=chief,
        batches=state.batches, batches_per_step=run.training.gradient_accumulation_steps,
        trained_seconds=state.trained_seconds, every_steps=run.training.checkpoint_every_steps)
    nan_stop = callbacks_lib.StopOnNaN(checkpoint_callback)
    time_budget = (callbacks_lib.TimeBudget(
        options.max_minutes, strategy=strategy if multi_worker else None,
        seconds_before=state.seconds_before) if options.max_minutes is not None else None)
    monitor = callbacks_lib.TrainingMonitor(logdir, options.log_every, enabled=chief)
    callbacks = [nan_stop, callbacks_lib.StopAtStep(planned_steps)] + (
        [time_budget] if time_budget else []) + (
        [callbacks_lib.TimeCooldown(time_budget, run.training.cooldown_minutes, time_factor)]
        if time_factor is not None else []) + [monitor, checkpoint_callback]
    time_only = time_budget is not None and options.max_steps is None and options.epochs is None
    # Keras' bar is replaced (on every worker; only the chief prints lines instead).
    # Keras redraws its bar in place even in a log file or a pipe (a line of escape
    # codes per step), or with verbose=2 says nothing for eval_every steps.
    own_lines = time_only or (options.verbose == 1 and not console.is_terminal())
    keep_best = early_stopping = None
    if validating and chief:  # KeepBest after the BLEU it reads
        callbacks.append(_validation_translations(
            model.network, prepared, options.validation_sentences, monitor))
        keep_best = KeepBest(model.network, pathlib.Path(options.model_dir),
                             checkpoint_callback.run_seconds)
        callbacks.append(keep_best)
    if options.early_stopping is not None:
        early_stopping = EarlyStopping(options.early_stopping, keep_best,
                                       strategy=strategy if multi_worker else None)
        callbacks.append(early_stopping)
    if own_lines and options.verbose and chief:  # after the validation callbacks: dev BLEU
        callbacks.append(callbacks_lib.ProgressLines(
            None if time_only else planned_steps, time_budget))
    plateau = state.plateau
    if plateau is not None and validation_data is not None:
        # Once per pass over the training data, as the ConvS2S paper did (the pass length
        # counted once: bucketing's padding and the length filter make token counts
        # only an estimate). Every worker computes the same dev loss and shrinks alike.
        plateau.check_every_pass(steps_per_pass(), functools.partial(
            mean_dev_nll, model, validation_data, compiled_loss_sums(model)))
        # Before the checkpoint callback, so that a save at a step holds the new rate.
        callbacks.insert(callbacks.index(checkpoint_callback), plateau)
    return _Callbacks(callbacks, checkpoint_callback, nan_stop, monitor, time_budget,
                      early_stopping, own_lines)


def planned_last_step(options: TrainOptions, training: TrainingConfig,
                      steps_per_pass) -> tuple[int, bool]:
    """(the step the run ends at, whether that is where its rate schedule ends): the
    epoch or step plan (a time budget alone: no step limit, 10**12), cut at the end of a
    schedule whose rate is 0 after it. `steps_per_pass()` counts the steps of one pass
    over the training data (called for an epoch plan only)."""
    if options.epochs is not None:
        planned = math.ceil(options.epochs * steps_per_pass())
    else:
        planned = options.max_steps or 10**12
    schedule_end = _schedule_end(training)
    if schedule_end is not None and schedule_end < planned:
        return schedule_end, True  # past it every update has rate 0
    return planned, False


def why_it_stopped(*, out_of_time: bool, early_stopping_reason: str | None,
                   plateau_finished: bool, ends_with_schedule: bool, planned_steps: int,
                   max_minutes: float | None, min_learning_rate: float) -> tuple[str, str]:
    """(TrainResult.stopped_by, its reason in words) of a run that ended without an error,
    by precedence: the time budget, early stopping (its reason given), the plateau rule's
    minimum rate, the end of the rate schedule, the planned step."""
    if out_of_time:
        return "time", f"trained the run's budget of {max_minutes:g} minutes"
    if early_stopping_reason is not None:
        return "early_stopping", early_stopping_reason
    if plateau_finished:
        return "plateau", (f"the learning rate fell below its minimum {min_learning_rate:g} "
                           "(dev NLL stopped improving)")
    if ends_with_schedule:
        return "steps", (f"reached step {planned_steps}, where the learning rate's cool-down "
                         "ends (lr_schedule warmup_hold_cooldown)")
    return "steps", f"reached the planned step {planned_steps}"


def _fit_until_stopped(model, data_from, start_step: int, planned_steps: int,
                       eval_every: int, validation_data, callbacks: _Callbacks, *,
                       verbose: int, multi_worker: bool) -> None:
    """`fit_on_the_validation_grid` from `start_step` to `planned_steps` with
    `callbacks.in_order`, listening for SIGTERM and Ctrl-C where one process trains
    (`stop_signal`: a worker that stopped alone would leave the others waiting). A stop
    saves the step under way and raises `StopRequested` saying where; a stop at the step
    the loss became NaN saves nothing and returns, so that the divergence is what the
    caller reports."""
    # Last: a stop lands after the checkpoint callback has counted the step's batches.
    stop = StopOnSignal()
    listening = contextlib.nullcontext() if multi_worker else stop.listening()
    try:
        with listening:
            fit_on_the_validation_grid(model, data_from, start_step, planned_steps,
                                       eval_every, validation_data=validation_data,
                                       callbacks=callbacks.in_order + [stop],
                                       verbose=verbose)
        if stop.received is not None:  # after the last step: the run is saved
            raise StopRequested(stop.received)
    except StopRequested as stopped:
        if callbacks.nan_stop.nan_step is None:
            _save_if_started(callbacks.checkpoint)
            stopped.saved(int(model.optimizer.iterations.numpy()),
                          callbacks.checkpoint.manager.latest_checkpoint)
            raise


def _time_clocked(training: TrainingConfig) -> bool:
    """Whether the rate's cool-down runs on the time budget's clock."""
    return (training.optimizer == "adam" and training.lr_schedule == "warmup_hold_cooldown"
            and training.cooldown_minutes is not None)


def check_cooldown_clock(training: TrainingConfig, max_minutes: float | None,
                         multi_worker: bool) -> None:
    """Refuses a time-clocked cool-down (`cooldown_minutes`) without a time budget, or across
    workers: each worker would read its own clock and set its own rate, and their replicas
    of the model would part."""
    if not _time_clocked(training):
        return
    if max_minutes is None:
        raise ValueError(f"cooldown_minutes {training.cooldown_minutes:g}: a time-clocked "
                         "cool-down needs a time budget (max_minutes)")
    if multi_worker:
        raise ValueError(f"cooldown_minutes {training.cooldown_minutes:g}: a time-clocked "
                         "cool-down reads one machine's clock; across workers give a step "
                         "clock (schedule_steps and cooldown_steps) or a step plan")


def _schedule_end(training: TrainingConfig) -> int | None:
    """The last step of a learning-rate schedule that ends (its rate is 0 after), else None."""
    if training.optimizer == "adam" and training.lr_schedule == "warmup_hold_cooldown":
        return training.schedule_steps
    return None


def _recipe_plan(options: TrainOptions, run, model_dir: pathlib.Path, strategy, pooled,
                 dataset, steps_per_pass) -> recipe_plan.RecipePlan | None:
    """The run's recipe plan: the recorded one of a run that has it (a resumed run keeps
    its plan, measured or not), a new one for a new run with `options.recipe == "planned"`,
    else None (the configs as given). `dataset(split, repeat, shuffle)` makes the run's
    batches; `steps_per_pass()` counts the steps of one pass over them."""
    recorded = model_dir_lib.read_recipe_plan(model_dir)
    if recorded is not None:
        logger.info("the run keeps its recorded recipe plan (%s)",
                    model_dir / model_dir_lib.RECIPE_PLAN_FILE)
        return recipe_plan.RecipePlan.from_dict(
            recorded, source=str(model_dir / model_dir_lib.RECIPE_PLAN_FILE))
    if options.recipe != "planned":
        return None
    if (model_dir / model_dir_lib.RUN_CONFIG).exists():
        logger.info("%s was trained with its preset's recipe; it keeps it (no plan)",
                    model_dir)
        return None
    if run.family != "transformer" or run.training.optimizer != "adam":
        logger.info("the planned recipe's rules are the Transformer's with Adam; this run "
                    "(%s, %s) keeps its preset's recipe", run.family, run.training.optimizer)
        return None
    user_fields = set(options.model_overrides) | set(options.training_overrides)
    common = {"steps_per_pass": steps_per_pass(), "model_config": run.model,
              "training_config": run.training, "user_fields": user_fields}
    if options.max_steps is not None or options.epochs is not None:
        steps = options.max_steps or math.ceil(options.epochs * common["steps_per_pass"])
        return recipe_plan.plan_recipe(budget_steps=steps, **common)
    if is_multi_worker(strategy):
        raise ValueError("the planned recipe with a time budget alone measures this "
                         "machine's speed; across workers give a step plan (max_steps)")
    started = time.monotonic()
    with strategy.scope():  # a throw-away model with every dropout a plan may turn on
        probe_model = build_model_and_optimizer(
            run.model.replace(**recipe_plan.heaviest_dropouts(run.model, user_fields)),
            run.training, options.jit_compile, family=run.family, pooled=pooled)
    data = dataset("train", True, True)
    if run.training.gradient_accumulation_steps > 1:
        data = data.apply(pack_micro_batches(run.training.gradient_accumulation_steps))
    speed = probe_speed(probe_model, data, max_seconds=options.probe_seconds)
    logger.info("speed probe: %.3f steps/s over %d steps (%d tracing steps left out)",
                speed.steps_per_second, speed.timed_steps, speed.tracing_steps)
    return recipe_plan.plan_recipe(budget_minutes=options.max_minutes,
                                   steps_per_second=speed.steps_per_second,
                                   probe_seconds=time.monotonic() - started, **common)
