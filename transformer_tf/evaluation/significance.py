"""Is one system's BLEU or chrF above another's beyond the noise of the test set?
sacreBLEU's own paired bootstrap resampling (`sacrebleu.significance.PairedTest` with
test_type "bs", what `sacrebleu --paired-bs` runs; Koehn 2004), for `evaluate --against`.

sacreBLEU draws `samples` resamples of the sentences (with replacement, the same draws
for both systems; seed SACREBLEU_SEED, 12345 unless set), scores both systems on each,
and reports for the system against the baseline (the --against file):

  p_value   the share of resamples whose centred difference |d*| - mean|d*| exceeds the
            observed |d|, with the +1 correction, (c + 1) / (samples + 1); a two-sided
            test of "no difference";
  mean, ci  the mean of the system's resampled scores and half the width of their
            central 95% interval (score ~ mean +- ci), for each system.

One rule is ours: a zero difference is never significant, and its p is 1. sacreBLEU
returns its smallest p, 1 / (samples + 1), for two systems whose scores are the same on
every resample (identical outputs), because its centred statistic is then 0 and never
exceeds the observed 0.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Sequence

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from transformer_tf.evaluation.hypothesis_files import read_hypotheses_and_references

SIGNIFICANCE_LEVEL = 0.05
DEFAULT_SAMPLES = 1000  # sacreBLEU's default number of bootstrap resamples
# Our metric keys (those of `scoring.EvaluationReport`) and the metrics, as sacreBLEU's
# defaults compute them there (cased BLEU with 13a tokenization, chrF2).
METRICS = {"bleu": BLEU, "chrf": CHRF}


@dataclasses.dataclass(frozen=True)
class MetricComparison:
    """One metric's paired bootstrap; scores in sacreBLEU's units (0-100)."""

    key: str  # "bleu", "chrf"
    name: str  # sacreBLEU's name: "BLEU", "chrF2"
    score: float
    against_score: float
    p_value: float
    mean: float
    ci: float
    against_mean: float
    against_ci: float
    signature: str  # sacreBLEU's, with the resamples (bs:) and seed

    @property
    def difference(self) -> float:
        return self.score - self.against_score

    @property
    def significant(self) -> bool:
        """p < SIGNIFICANCE_LEVEL (a zero difference never is)."""
        return self.difference != 0 and self.p_value < SIGNIFICANCE_LEVEL

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "difference": self.difference,
                "significant": self.significant}


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The paired bootstrap of a system against another on the same references."""

    metrics: tuple[MetricComparison, ...]
    samples: int
    against_file: str | None = None

    def to_dict(self) -> dict:
        return {"test": "paired bootstrap resampling (sacrebleu.significance, test_type bs)",
                "samples": self.samples, "significance_level": SIGNIFICANCE_LEVEL,
                "against": self.against_file,
                **{m.key: m.to_dict() for m in self.metrics}}

    def format_text(self) -> str:
        against = self.against_file or "the other system"
        lines = [f"paired bootstrap against {against} (sacreBLEU's, {self.samples} "
                 f"resamples; significant: p < {SIGNIFICANCE_LEVEL}):"]
        for m in self.metrics:
            verdict = "significant" if m.significant else "not significant"
            lines.append(f"  {m.name}: {m.score:.2f} vs {m.against_score:.2f}, difference "
                         f"{m.difference:+.2f}, p = {m.p_value:.4f}, {verdict}; "
                         f"95% CI {m.mean:.2f} +- {m.ci:.2f} vs {m.against_mean:.2f} +- "
                         f"{m.against_ci:.2f}")
            lines.append(f"    {m.signature}")
        return "\n".join(lines)


def paired_bootstrap(hypotheses: Sequence[str], against: Sequence[str],
                     reference_streams: Sequence[Sequence[str]],
                     samples: int = DEFAULT_SAMPLES,
                     against_file: str | None = None) -> Comparison:
    """sacreBLEU's paired bootstrap of `hypotheses` against the baseline `against` (the
    same segments, detokenized) for BLEU and chrF (module doc).

    Args:
      reference_streams: one list of references per stream (sacreBLEU's layout).
      samples: bootstrap resamples (>= 1).

    Raises:
      ValueError: `samples` < 1, or the two systems differ in segments.
    """
    if samples < 1:
        raise ValueError(f"samples: must be at least 1, got {samples}")
    if len(hypotheses) != len(against):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(against)} to compare with")
    metrics = {key: make() for key, make in METRICS.items()}
    test = PairedTest([("against", list(against)), ("system", list(hypotheses))], metrics,
                      [list(stream) for stream in reference_streams], test_type="bs",
                      n_samples=samples)
    signatures, results = test()
    compared = []
    for key, metric in zip(METRICS, signatures):  # sacreBLEU keeps our order
        baseline, system = results[metric]
        p_value = 1.0 if system.score == baseline.score else float(system.p_value)
        compared.append(MetricComparison(
            key=key, name=metric, score=float(system.score),
            against_score=float(baseline.score), p_value=p_value, mean=float(system.mean),
            ci=float(system.ci), against_mean=float(baseline.mean),
            against_ci=float(baseline.ci), signature=signatures[metric].format()))
    return Comparison(tuple(compared), samples, against_file)


def compare_files(hyp_path, against_path, ref_paths,
                  samples: int = DEFAULT_SAMPLES) -> Comparison:
    """`paired_bootstrap` of the files' lines; the `hypothesis_files` errors (naming the file)
    for unreadable files or line counts that differ from the references'."""
    hypotheses, streams = read_hypotheses_and_references(hyp_path, ref_paths)
    against, _ = read_hypotheses_and_references(against_path, ref_paths)
    return paired_bootstrap(hypotheses, against, streams, samples,
                            against_file=os.fspath(against_path))
