"""Choosing the final model on the development set among the latest checkpoint, the
average of the final ones, and the best checkpoint by dev BLEU during training
(MDIR/checkpoints/best/): another candidate is kept only when it is better than the one
before it (averaging in a checkpoint from too early in training can cost many BLEU points;
a run that got worse late keeps its best).

Each candidate checkpoint is scored on the dev split of the prepared data: its
negative log-likelihood per real target token (teacher forced, every dev pair) and the
cased sacreBLEU of its translations of the dev sources with the run's search settings.

The rule (`choose`): a BLEU difference decides only when it is beyond the dev set's noise,
that is when a paired bootstrap over the dev sentences finds the higher-BLEU candidate
higher in at least 95% of the draws (`paired_bootstrap.SIGNIFICANT_FRACTION`); otherwise the
lower NLL decides. On a small dev set, or between two near-useless models, a BLEU lead of a
few hundredths is noise (and may even change with the CPU's rounding), while an NLL gap of a
nat per token is not.
"""
from __future__ import annotations

import dataclasses
import pathlib

from transformer_tf.config import DecodingConfig
from transformer_tf.data.datasets import make_evaluation_dataset
from transformer_tf.evaluation import corpus_bleu
from transformer_tf.evaluation.hypothesis_files import read_lines
from transformer_tf.evaluation.paired_bootstrap import (
    PairedBootstrap,
    bleu_paired_bootstrap,
)
from transformer_tf.inference.batch import from_translator, translate_lines
from transformer_tf.inference.loading import load_trained, pick_checkpoint
from transformer_tf.inference.translator import Translator
from transformer_tf.rundir import checkpoints
from transformer_tf.rundir import model_dir as model_dir_lib
from transformer_tf.rundir.best_checkpoint import read_best
from transformer_tf.rundir.model_dir import read_tokenizer_proto
from transformer_tf.training import averaging
from transformer_tf.training.trainer import Seq2SeqTrainer
from transformer_tf.training.word_loss import pooled_ids


@dataclasses.dataclass(frozen=True)
class DevScore:
    name: str  # e.g. "averaged", "latest"
    checkpoint: str
    nll: float  # nats per real dev target token
    bleu: float  # cased sacreBLEU of the dev translations
    # The dev translations BLEU was computed on (for the paired bootstrap; not reported).
    translations: tuple = dataclasses.field(default=(), repr=False, compare=False)

    def describe(self) -> str:
        return f"{self.name}: dev BLEU {self.bleu:.2f}, dev NLL {self.nll:.4f}"

    def as_dict(self) -> dict:
        """name, checkpoint, nll and bleu (the translations left out)."""
        return {"name": self.name, "checkpoint": self.checkpoint, "nll": self.nll,
                "bleu": self.bleu}


class DevScorer:
    """Scores checkpoints of one run on the dev set of `prepared`: NLL on the whole dev set,
    BLEU on its first `bleu_limit` sentences (None: all).

    The model, the loss and the search are built (and traced) once; each checkpoint is
    then only a weight restore and the runs over the dev set, so scoring a second
    candidate costs no second trace."""

    def __init__(self, model_dir, prepared, checkpoint=None,
                 decoding: DecodingConfig | None = None, batch_size: int = 64,
                 bleu_limit: int | None = None):
        self.model_dir = model_dir
        # Built with `checkpoint`'s weights (the run's default one when None).
        self.model, tokenizer, run, self._loaded = load_trained(model_dir, checkpoint, decoding)
        self.trainer = Seq2SeqTrainer(
            self.model, label_smoothing=run.training.label_smoothing,
            pooled_ids=pooled_ids(run.training, read_tokenizer_proto(model_dir),
                                  run.model.vocab_size, where=f"run {model_dir}"))
        self.trainer.compile(jit_compile=False)
        self.dataset = make_evaluation_dataset(prepared, "valid",
                                               max_length=run.training.max_length,
                                               report_truncation=False)
        files = prepared.files("valid")
        self.sources, self.references = read_lines(files.source), read_lines(files.target)
        if bleu_limit:
            self.sources, self.references = (self.sources[:bleu_limit],
                                             self.references[:bleu_limit])
        self.tokenizer, self.decoding = tokenizer, run.decoding
        self.translator = from_translator(Translator(self.model, tokenizer, run.decoding))
        self.batch_size = batch_size

    def _load(self, checkpoint) -> str:
        path = pick_checkpoint(self.model_dir, checkpoint)
        if path != self._loaded:
            checkpoints.load_weights(self.model, path)
            self._loaded = path
        return path

    def _translate(self, translator) -> tuple:
        translations, _ = translate_lines(translator, self.sources, self.batch_size,
                                          progress=False)
        return tuple(row[0] for row in translations)

    def score(self, name: str, checkpoint) -> DevScore:
        path = self._load(checkpoint)
        nll = float(self.trainer.evaluate(self.dataset, verbose=0, return_dict=True)["nll"])
        hypotheses = self._translate(self.translator)
        bleu = float(corpus_bleu(hypotheses, self.references))
        return DevScore(name=name, checkpoint=str(path), nll=nll, bleu=bleu,
                        translations=hypotheses)

    def bleu_with(self, checkpoint, beam_size: int, alpha: float) -> float:
        """Dev BLEU of `checkpoint` searched with `beam_size` and `alpha` (the run's other
        search settings kept)."""
        self._load(checkpoint)
        decoding = self.decoding.with_overrides(beam_size=beam_size, alpha=alpha)
        translator = from_translator(Translator(self.model, self.tokenizer, decoding))
        return float(corpus_bleu(self._translate(translator), self.references))


def score_on_dev(name: str, model_dir, checkpoint, prepared,
                 decoding: DecodingConfig | None = None, batch_size: int = 64,
                 bleu_limit: int | None = None) -> DevScore:
    """Dev NLL (the whole dev set) and BLEU (its first `bleu_limit` sentences; None: all)
    of `checkpoint` of the run in `model_dir`, searched with `decoding` (None: the run's)."""
    return DevScorer(model_dir, prepared, checkpoint, decoding, batch_size,
                     bleu_limit).score(name, checkpoint)


@dataclasses.dataclass(frozen=True)
class Choice:
    chosen: DevScore
    reason: str  # one line: the BLEU difference, whether it is beyond noise, what decided
    bootstrap: PairedBootstrap  # challenger (A) against incumbent (B)


def choose(incumbent: DevScore, challenger: DevScore, bootstrap: PairedBootstrap) -> Choice:
    """The better of two candidates on the dev set: the higher BLEU when `bootstrap` (the
    challenger's BLEU against the incumbent's, paired over the same dev sentences) finds
    the difference beyond noise, else the lower NLL (a tie in NLL too keeps the
    incumbent)."""
    difference = challenger.bleu - incumbent.bleu
    evidence = (f"{challenger.name} higher in {100 * bootstrap.a_better:.1f}%, "
                f"{incumbent.name} in {100 * bootstrap.b_better:.1f}% of {bootstrap.samples} "
                f"paired bootstrap samples of the {bootstrap.sentences} dev sentences")
    head = f"{challenger.name} {difference:+.2f} BLEU against {incumbent.name}"
    if bootstrap.beyond_noise:
        chosen = challenger if difference > 0 else incumbent
        return Choice(chosen, f"{head}, beyond noise ({evidence}): BLEU decides, "
                              f"{chosen.name}", bootstrap)
    chosen = challenger if challenger.nll < incumbent.nll else incumbent
    return Choice(chosen, f"{head}, within noise ({evidence}): the lower dev NLL decides, "
                          f"{chosen.name} ({chosen.nll:.4f} against "
                          f"{(incumbent if chosen is challenger else challenger).nll:.4f})",
                  bootstrap)


def compare_on_dev(incumbent: DevScore, challenger: DevScore, references) -> Choice:
    """`choose` between two scored candidates, bootstrapping their dev translations
    against `references` (the sentences their BLEU was computed on)."""
    bootstrap = bleu_paired_bootstrap(challenger.translations, incumbent.translations,
                                      references)
    return choose(incumbent, challenger, bootstrap)


@dataclasses.dataclass(frozen=True)
class Selection:
    chosen: DevScore
    # DevScore per candidate: "latest", then "averaged" and "best" when there were such
    scores: list
    averaged_sources: list  # checkpoint prefixes averaged (empty: not averaged)
    note: str  # what was averaged, or why not; and the best checkpoint's step
    reason: str  # why `chosen` was kept (the `Choice.reason`s, or: the only candidate)


def average_and_choose(model_dir, prepared, last: int, out=None,
                       decoding: DecodingConfig | None = None,
                       bleu_limit: int | None = None) -> Selection:
    """Average up to `last` checkpoints from the final part of training
    (`averaging.tail_checkpoints` of `averaging.candidate_checkpoints`) and choose on the
    dev set of `prepared` (BLEU on its first `bleu_limit` sentences, None: all) among the
    latest checkpoint, that average and the run's best checkpoint by dev BLEU during
    training, in that order, by `compare_on_dev`: a candidate replaces the one kept so far
    only when better. With fewer than two checkpoints in the tail nothing is averaged; a
    best checkpoint at the latest step is the latest. Holds the run's lock, and records the
    choice in the run directory (`model_dir.write_chosen`), where export and translate
    find it."""
    with model_dir_lib.hold_existing_run(model_dir):
        selection = _average_and_choose(model_dir, prepared, last, out, decoding, bleu_limit)
        model_dir_lib.write_chosen(model_dir, model_dir_lib.ChosenCheckpoint(
            checkpoint=selection.chosen.checkpoint, name=selection.chosen.name,
            reason=selection.reason,
            newest_step=checkpoints.checkpoint_step(selection.scores[0].checkpoint)))
    return selection


def _average_and_choose(model_dir, prepared, last, out, decoding, bleu_limit) -> Selection:
    available = checkpoints.readable_checkpoints(checkpoints.list_checkpoints(model_dir))
    if not available:
        raise ValueError(f"{model_dir} has no checkpoints")
    tail = averaging.tail_checkpoints(averaging.candidate_checkpoints(model_dir), last)
    scorer = DevScorer(model_dir, prepared, available[-1], decoding, bleu_limit=bleu_limit)
    latest = scorer.score("latest", available[-1])
    scores, sources, reasons, kept = [latest], [], [], latest
    if len(tail) < 2:
        notes = [f"not averaged: {len(tail)} checkpoint(s) in the final "
                 f"{averaging.TAIL_FRACTION:.0%} of training"]
    else:
        averaged = averaging.average_run(model_dir, last, out=out, allow_fewer=True,
                                         tail_only=True)
        sources = list(averaged.sources)
        notes = [f"averaged {', '.join(pathlib.Path(p).name for p in sources)}"]
        scores.append(scorer.score("averaged", averaged.path))
    best = read_best(model_dir)
    problem = best and checkpoints.checkpoint_problem(best.checkpoint)
    if problem:
        notes.append(f"the best checkpoint is damaged ({problem}): not a candidate")
    elif best is not None:
        where = f"best by dev BLEU during training: step {best.step} ({best.dev_bleu:.2f})"
        if best.step == checkpoints.checkpoint_step(latest.checkpoint):
            notes.append(f"{where}, the latest")
        else:
            notes.append(where)
            scores.append(scorer.score("best", best.checkpoint))
    for challenger in scores[1:]:
        choice = compare_on_dev(kept, challenger, scorer.references)
        kept = choice.chosen
        reasons.append(choice.reason)
    return Selection(chosen=kept, scores=scores, averaged_sources=sources,
                     note="; ".join(notes),
                     reason="; then ".join(reasons) or "latest: the only candidate")
