"""The parsing job (paper section 6.3) end to end, what scripts/parse_job.py runs:

1. prepare the treebank (`data.treebank_to_prepared.prepare_treebank`) into WORK/data;
2. train the preset with `model.fit` within a time budget (WORK/model; TensorBoard logs in
   WORK/model/logs), resuming a run already there;
3. average up to `average_last` checkpoints from the final part of training and keep the
   average only if its dev F1 (greedy decoding, cheap) is at least the latest
   checkpoint's;
4. parse dev and test with the chosen checkpoint and the run's search (the preset's:
   beam 21, output up to input + 300; `parsing_paper` (= `parsing`): alpha 0.3, no
   grammar; `parsing_cpu`: alpha 5.0 under the tree grammar; unless overridden), read the
   outputs back with repairs
   counted, and score them with EVALB's COLLINS.prm rules;
5. export a SavedModel whose serving_default parses sentences into trees;
6. parse a few example sentences through it.
Everything is summarised in WORK/summary.json.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import pathlib
import time

import tensorflow as tf

from transformer_tf.config import DecodingConfig
from transformer_tf.data.linearise import DEFAULT_LEAVES
from transformer_tf.data.prepared_reader import METADATA_FILE, load_prepared
from transformer_tf.data.treebank_reader import TreebankError
from transformer_tf.data.treebank_to_prepared import gold_path, prepare_treebank
from transformer_tf.evaluation.evalb import evalb
from transformer_tf.evaluation.hypothesis_files import read_lines
from transformer_tf.export.saved_model import export_model_dir
from transformer_tf.inference.batch import load_translator
from transformer_tf.inference.loading import source_decoding
from transformer_tf.inference.parser import parse_lines
from transformer_tf.jobs.stages import (
    JobStages,
    check_export_free,
    check_work_dir,
    export_version_dir,
)
from transformer_tf.presets.parsing import PRESET_LEAVES
from transformer_tf.presets.parsing import DEFAULT_PARSING_PRESET
from transformer_tf.rundir import checkpoints
from transformer_tf.rundir.lock import hold_run
from transformer_tf.rundir.model_dir import read_run_config
from transformer_tf.training import averaging
from transformer_tf.training.fit import TrainOptions, train

logger = logging.getLogger(__name__)

# The job's files at the top of its work directory: the greedy parses of the dev set by
# each candidate checkpoint, the parses of dev and test, the summary; and as patterns for
# `check_work_dir`.
GREEDY_TREES, TREES, SUMMARY = "valid.greedy.{name}.trees", "{split}.trees", "summary.json"
OUTPUTS = (GREEDY_TREES.format(name="*"), TREES.format(split="valid"),
           TREES.format(split="test"), SUMMARY)

EXAMPLE_SENTENCES = [
    "The Transformer parses sentences without recurrence .",
    "Ms. Haag plays Elianti .",
    "Investors sold shares of the company after it reported lower profits .",
]


@dataclasses.dataclass
class ParseJobOptions:
    treebank_dir: str
    work_dir: str = "runs/ptb_parsing"
    preset: str = DEFAULT_PARSING_PRESET
    vocab_size: int = 4000
    subword: str = "bpe"  # or "wordpiece" (whole words where the vocabulary has them)
    leaves: str | None = None  # "words" or "slot" (data.linearise); None: `preset_leaves`
    train_minutes: float | None = 45.0
    max_steps: int | None = None
    epochs: float | None = None
    eval_every: int = 200
    model_overrides: dict = dataclasses.field(default_factory=dict)
    training_overrides: dict = dataclasses.field(default_factory=dict)
    decoding_overrides: dict = dataclasses.field(default_factory=dict)  # the run's, recorded
    average_last: int | None = None
    beam_size: int | None = None  # None: the preset's (parsing: 21)
    alpha: float | None = None  # parsing_paper: 0.3, parsing_cpu: 5.0
    max_extra_length: int | None = None  # parsing: 300
    grammar: str | None = None  # parsing_paper: "none", parsing_cpu: "tree"
    batch_size: int = 32
    saved_model_dir: str | None = None  # default WORK/saved_model/<the next free version>
    precision: str = "auto"
    verbose: int = 1


def preset_leaves(preset: str) -> str:
    """The leaf convention the treebank is prepared with for `preset` (the paper's
    presets: "slot"; parsing_cpu and any other: DEFAULT_LEAVES)."""
    return PRESET_LEAVES.get(preset, DEFAULT_LEAVES)


def prepare_or_reuse(treebank_dir, data_dir: pathlib.Path, vocab_size: int, subword: str,
                     leaves: str):
    """The treebank prepared in `data_dir` (with `leaves`), prepared now if it is not."""
    if not (data_dir / METADATA_FILE).exists():
        return prepare_treebank(treebank_dir, data_dir, vocab_size, subword=subword,
                                leaves=leaves)
    prepared = load_prepared(data_dir)
    print(f"already prepared: {data_dir}")
    prepared_leaves = prepared.metadata["treebank"].get("leaves", "slot")
    if prepared_leaves != leaves:
        raise TreebankError(f"{data_dir} was prepared with leaves {prepared_leaves!r}, not "
                            f"{leaves!r}: give another --work-dir")
    return prepared


def choose_checkpoint(model_dir: pathlib.Path, prepared, work: pathlib.Path,
                      decoding: DecodingConfig, average_last: int, batch_size: int,
                      progress: bool) -> dict:
    """Average up to `average_last` checkpoints from the final part of training and keep
    the average only if its greedy dev F1 is at least the latest checkpoint's
    (searched greedily with `decoding`'s other settings).

    Returns {"checkpoint": the chosen prefix, "chosen": "averaged" or "latest",
    "averaged_sources": [...], "dev_f1_greedy": {name: F1}}; greedy trees go to
    work/valid.greedy.<name>.trees.
    """
    available = checkpoints.list_checkpoints(model_dir)
    candidates = {"latest": available[-1]}
    averaged_sources: list = []
    if len(averaging.tail_checkpoints(available, average_last)) >= 2:
        averaged = averaging.average_run(model_dir, average_last, allow_fewer=True,
                                           tail_only=True)
        candidates["averaged"] = averaged.path
        averaged_sources = list(averaged.sources)
    dev_greedy = {}
    for name, path in candidates.items():
        scored = parse_and_score(model_dir, path, prepared, "valid",
                                 work / GREEDY_TREES.format(name=name), batch_size,
                                 progress, decoding.replace(beam_size=1))
        dev_greedy[name] = scored["evalb"]["all"]["f1"]
        print(f"  {name} ({pathlib.Path(path).name}): dev F1 greedy {dev_greedy[name]:.2f}")
    chosen = ("averaged" if "averaged" in dev_greedy
              and dev_greedy["averaged"] >= dev_greedy["latest"] else "latest")
    print(f"chosen: {chosen} ({pathlib.Path(candidates[chosen]).name})")
    return {"checkpoint": candidates[chosen], "chosen": chosen,
            "averaged_sources": averaged_sources, "dev_f1_greedy": dev_greedy}


def parse_and_score(model_dir, checkpoint, prepared, split: str, out_path, batch_size: int,
                    progress: bool, decoding: DecodingConfig) -> dict:
    """Parse `split` of `prepared` with `checkpoint` searching with `decoding`, write the
    trees to `out_path` and return {"evalb": ..., "repairs": ..., "seconds": ...}."""
    started = time.monotonic()
    translator = load_translator(model_dir=str(model_dir), checkpoint=checkpoint,
                                 decoding=decoding)
    sentences = read_lines(prepared.files(split).source)
    trees, _, _, repairs = parse_lines(translator, sentences, batch_size, progress)
    pathlib.Path(out_path).write_text("".join(t + "\n" for t in trees), encoding="utf-8")
    report = evalb(read_lines(gold_path(prepared, split)), trees)
    return {"evalb": report.as_dict(), "repairs": repairs.as_dict(),
            "seconds": round(time.monotonic() - started, 1), "trees": str(out_path),
            "report_text": report.format_text()}


def run_parse_job(options: ParseJobOptions) -> dict:
    """Run every step, holding the run directory's lock (`rundir.lock.hold_run`) throughout;
    returns (and writes to summary.json) the summary."""
    work = pathlib.Path(options.work_dir)
    if options.saved_model_dir is not None:
        check_export_free(options.saved_model_dir)  # refused now, not after training
    check_work_dir(work, OUTPUTS)
    with hold_run(work / "model", create=True):
        return _run_parse_job(options, work)


def _run_parse_job(options: ParseJobOptions, work: pathlib.Path) -> dict:
    stages = JobStages()
    data_dir, model_dir = work / "data", work / "model"
    progress = options.verbose > 0

    leaves = options.leaves or preset_leaves(options.preset)
    stages.begin(f"1/6 prepare the treebank {options.treebank_dir} -> {data_dir} "
                 f"(leaves {leaves!r})")
    prepared = prepare_or_reuse(options.treebank_dir, data_dir, options.vocab_size,
                                options.subword, leaves)
    info = prepared.metadata["treebank"]
    print(f"split {info['split_rule']}; sentences {info['sentences']}")
    stages.done("prepare")

    stages.begin(f"2/6 train preset {options.preset!r} -> {model_dir} "
                 f"(TensorBoard: tensorboard --logdir {model_dir / 'logs'})")
    result = train(TrainOptions(
        data_dir=str(data_dir), model_dir=str(model_dir), preset=options.preset,
        model_overrides=options.model_overrides,
        training_overrides=options.training_overrides,
        decoding_overrides=options.decoding_overrides, max_steps=options.max_steps,
        epochs=options.epochs, max_minutes=options.train_minutes,
        eval_every=options.eval_every, validation_sentences=0,
        precision=options.precision, verbose=options.verbose))
    print(f"trained to step {result.step} in {result.seconds / 60:.1f} min "
          f"(stopped by {result.stopped_by})")
    run = read_run_config(model_dir)
    # The search every later stage uses: the run's, with the settings given.
    decoding = source_decoding(model_dir=model_dir).with_overrides(
        beam_size=options.beam_size, alpha=options.alpha,
        max_extra_length=options.max_extra_length, grammar=options.grammar)
    stages.done("train")

    average_last = options.average_last or run.training.average_last
    stages.begin(f"3/6 average up to {average_last} checkpoints from the final "
                 f"{averaging.TAIL_FRACTION:.0%} of training; keep the average only if its dev "
                 "F1 (greedy) is at least the latest checkpoint's")
    choice = choose_checkpoint(model_dir, prepared, work, decoding, average_last,
                               options.batch_size, progress)
    checkpoint, chosen = choice["checkpoint"], choice["chosen"]
    averaged_sources, dev_greedy = choice["averaged_sources"], choice["dev_f1_greedy"]
    stages.done("average_and_select")

    stages.begin(f"4/6 parse dev and test (beam {decoding.beam_size}, alpha {decoding.alpha}, "
                 f"max length input + {decoding.max_extra_length}, grammar {decoding.grammar!r}) "
                 "and score with EVALB's rules")
    results = {}
    for split in ("valid", "test"):
        results[split] = parse_and_score(model_dir, checkpoint, prepared, split,
                                         work / TREES.format(split=split), options.batch_size,
                                         progress, decoding)
        repairs = results[split]["repairs"]
        print(f"{split}: {results[split].pop('report_text')}\nrepairs: {repairs['total']} in "
              f"{repairs['repaired_sentences']} sentences {repairs}")
    stages.done("parse_and_score")

    export_dir = (pathlib.Path(options.saved_model_dir) if options.saved_model_dir
                  else export_version_dir(work / "saved_model", None))
    stages.begin(f"5/6 export the SavedModel -> {export_dir}")
    export_model_dir(model_dir, export_dir, checkpoint=checkpoint, parser=True,
                     decoding=decoding)
    stages.done("export")

    stages.begin("6/6 parse example sentences through the exported serving_default signature")
    loaded = tf.saved_model.load(str(export_dir))
    outputs = loaded.signatures["serving_default"](text=tf.constant(EXAMPLE_SENTENCES))
    examples = [(s, t.decode("utf-8")) for s, t in zip(EXAMPLE_SENTENCES,
                                                         outputs["tree"].numpy())]
    for sentence, tree in examples:
        print(f"  {sentence}\n  -> {tree}")
    stages.done("serve_examples")

    summary = {
        "treebank": info["directory"], "split_rule": info["split_rule"],
        "sentences": info["sentences"], "preset": options.preset, "leaves": leaves,
        "model_config": run.model.get_config(), "training_config": run.training.get_config(),
        "decoding": decoding.get_config(), "train_steps": result.step,
        "resumed_from_step": result.start_step,
        "train_seconds_this_invocation": round(result.seconds, 1),
        "stopped_by": result.stopped_by, "precision": result.precision,
        "averaged_checkpoints": averaged_sources, "dev_f1_greedy": dev_greedy,
        "chosen": chosen, "chosen_checkpoint": checkpoint,
        "dev": results["valid"], "test": results["test"],
        "saved_model": str(export_dir), "examples": examples,
        "stage_seconds": stages.seconds, "total_seconds": stages.total_seconds(),
    }
    (work / SUMMARY).write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    return summary
