"""Choosing the final model on the development set: the averaged checkpoint only when it
is better than the latest one (averaging in a checkpoint from too early in training can
cost many BLEU points).

Each candidate checkpoint is scored on the dev split of the prepared data: its
negative log-likelihood per real target token (teacher forced, every dev pair) and the
cased sacreBLEU of its translations of the dev sources with the run's search settings.
The better BLEU wins; equal BLEU goes to the lower NLL.
"""
from __future__ import annotations

import dataclasses
import pathlib

from transformer_tf.data.datasets import make_evaluation_dataset
from transformer_tf.evaluation import corpus_bleu
from transformer_tf.evaluation.textfiles import read_lines
from transformer_tf.inference.batch import from_translator, translate_lines
from transformer_tf.inference.loading import load_trained, pick_checkpoint
from transformer_tf.inference.translator import Translator
from transformer_tf.training import checkpoints
from transformer_tf.training.model_dir import read_tokenizer_proto
from transformer_tf.training.trainer import Seq2SeqTrainer
from transformer_tf.training.word_loss import pooled_ids


@dataclasses.dataclass(frozen=True)
class DevScore:
    name: str  # e.g. "averaged", "latest"
    checkpoint: str
    nll: float  # nats per real dev target token
    bleu: float  # cased sacreBLEU of the dev translations

    def describe(self) -> str:
        return f"{self.name}: dev BLEU {self.bleu:.2f}, dev NLL {self.nll:.4f}"


class DevScorer:
    """Scores checkpoints of one run on the dev set of `prepared`: NLL on the whole dev set,
    BLEU on its first `bleu_limit` sentences (None: all).

    The model, the loss and the search are built (and traced) once; each checkpoint is
    then only a weight restore and the runs over the dev set, so scoring a second
    candidate costs no second trace."""

    def __init__(self, model_dir, prepared, checkpoint=None, beam_size=None, alpha=None,
                 batch_size: int = 64, bleu_limit: int | None = None):
        self.model_dir = model_dir
        # Built with `checkpoint`'s weights (the run's default one when None).
        self.model, tokenizer, run, self._loaded = load_trained(
            model_dir, checkpoint, beam_size=beam_size, alpha=alpha)
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
        self.translator = from_translator(Translator(self.model, tokenizer, run.decoding))
        self.batch_size = batch_size

    def score(self, name: str, checkpoint) -> DevScore:
        path = pick_checkpoint(self.model_dir, checkpoint)
        if path != self._loaded:
            checkpoints.load_weights(self.model, path)
            self._loaded = path
        nll = float(self.trainer.evaluate(self.dataset, verbose=0, return_dict=True)["nll"])
        translations, _ = translate_lines(self.translator, self.sources, self.batch_size,
                                          progress=False)
        bleu = float(corpus_bleu([row[0] for row in translations], self.references))
        return DevScore(name=name, checkpoint=str(path), nll=nll, bleu=bleu)


def score_on_dev(name: str, model_dir, checkpoint, prepared, beam_size=None, alpha=None,
                 batch_size: int = 64, bleu_limit: int | None = None) -> DevScore:
    """Dev NLL (the whole dev set) and BLEU (its first `bleu_limit` sentences; None: all)
    of `checkpoint` of the run in `model_dir`."""
    return DevScorer(model_dir, prepared, checkpoint, beam_size, alpha, batch_size,
                     bleu_limit).score(name, checkpoint)


def choose(scores: list[DevScore]) -> DevScore:
    """The best candidate: highest dev BLEU, then lowest dev NLL."""
    if not scores:
        raise ValueError("no candidates to choose from")
    return max(scores, key=lambda score: (score.bleu, -score.nll))


@dataclasses.dataclass(frozen=True)
class Selection:
    chosen: DevScore
    scores: list  # DevScore per candidate: "latest", and "averaged" when there was one
    averaged_sources: list  # checkpoint prefixes averaged (empty: not averaged)
    note: str  # what was averaged, or why not


def average_and_choose(model_dir, prepared, last: int, out=None, beam_size=None,
                       alpha=None, bleu_limit: int | None = None) -> Selection:
    """Average up to `last` checkpoints from the final part of training
    (`checkpoints.tail_checkpoints`) and choose between that average and the latest
    checkpoint on the dev set of `prepared` (BLEU on its first `bleu_limit` sentences,
    None: all). With fewer than two checkpoints in the tail nothing is averaged and the
    latest is chosen."""
    available = checkpoints.readable_checkpoints(checkpoints.list_checkpoints(model_dir))
    if not available:
        raise ValueError(f"{model_dir} has no checkpoints")
    tail = checkpoints.tail_checkpoints(available, last)
    scorer = DevScorer(model_dir, prepared, available[-1], beam_size=beam_size, alpha=alpha,
                       bleu_limit=bleu_limit)
    scores = [scorer.score("latest", available[-1])]
    sources: list = []
    if len(tail) >= 2:
        averaged = checkpoints.average_run(model_dir, last, out=out, allow_fewer=True,
                                           tail_only=True)
        sources = list(averaged.sources)
        scores.append(scorer.score("averaged", averaged.path))
        note = f"averaged {', '.join(pathlib.Path(p).name for p in sources)}"
    else:
        note = (f"not averaged: {len(tail)} checkpoint(s) in the final "
                f"{checkpoints.TAIL_FRACTION:.0%} of training")
    return Selection(chosen=choose(scores), scores=scores, averaged_sources=sources, note=note)
