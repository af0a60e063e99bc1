"""Heads with a job, measured (the paper's Figures 4-5): on the English side of Multi30k,
the share of possessive pronouns whose strongest encoder self-attention goes to their
antecedent, per layer and head, against the best fixed-offset baseline.

1. cases: the sentences of the chosen splits with a possessive and its antecedent
   (`data.possessives`, a lexicon rule; results/attention/antecedent-spot-check.tsv);
2. the positional baseline (`evaluation.pronoun_heads.positional_baseline`): needs no
   model, so `baseline_only` stops here;
3. every layer and head's share (`inference.pronoun_attention`, word level);
4. the figure: the best head and the head of the same layer with the lowest share,
   drawn by `visualization.figures.write_figures` (their heat maps side by side, and the
   lines from the pronoun) for the first case the best head gets right and the other
   wrong, with the sentence's German reference as target;
5. the best head against the baseline on the same cases: those only one of them gets
   right, and the exact sign test over them (`head_against_offset`);
6. the results file (results/README.md's format): cases, baseline, every head's share.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import pathlib

import numpy as np

from transformer_tf.data.multi30k import multi30k_corpus
from transformer_tf.data.possessives import PronounCase, find_case
from transformer_tf.data.text_lines import iter_parallel_lines
from transformer_tf.evaluation.pronoun_heads import (
    head_against_offset,
    head_hits,
    positional_baseline,
    strongest_other_word,
)
from transformer_tf.runtime.outputs import refuse_existing
from transformer_tf.runtime.provenance import current_commit, machine_description

COLUMNS = [{"key": "layer", "label": "layer"}, {"key": "head", "label": "head"},
           {"key": "share", "label": "share to the antecedent", "format": "{:.3f}"},
           {"key": "hits", "label": "cases right"}]


@dataclasses.dataclass
class PronounHeadsOptions:
    """Options of the measurement (scripts/pronoun_heads.py --help).

    Attributes:
      results: the results file to write.
      model_dir / saved_model: the trained model (one of them; neither with baseline_only).
      data_dir: where Multi30k is (None: $TRANSFORMER_TF_DATA); never downloaded.
      splits: Multi30k splits whose English side is searched for cases.
      figure_dir: where the figure goes (None: no figure).
      baseline_only: only the cases and the positional baseline.
      overwrite: replace an existing `results` file and the PNG files in `figure_dir`
        (else they are refused before any work: `check_outputs`).
      command: the command line, recorded in the results file.
    """

    results: str
    model_dir: str | None = None
    saved_model: str | None = None
    checkpoint: str | None = None
    data_dir: str | None = None
    splits: tuple = ("valid", "test")
    figure_dir: str | None = None
    baseline_only: bool = False
    batch_size: int = 32
    overwrite: bool = False
    command: str = "python scripts/pronoun_heads.py"


def check_outputs(options: PronounHeadsOptions) -> None:
    """Refuses (FileExistsError, naming them) a results file that exists and PNG files in
    the figure directory, unless `options.overwrite`: the figures' names depend on the
    head the measurement finds, so any PNG there could be replaced."""
    if options.overwrite:
        return
    figures = (sorted(pathlib.Path(options.figure_dir).rglob("*.png"))
               if options.figure_dir is not None else [])
    refuse_existing([options.results, *figures], "give another --results or --figure-dir, "
                                                 "or --overwrite to replace them")


def read_cases(data_dir, splits) -> list[tuple[PronounCase, str]]:
    """(case, German reference) of every English sentence of `splits` that has one."""
    corpus = multi30k_corpus("en", "de", data_dir, download_if_missing=False)
    cases = []
    for split in splits:
        files = corpus.splits[split]
        for english, german in iter_parallel_lines(files.source, files.target):
            case = find_case(english)
            if case is not None:
                cases.append((case, german))
    return cases


def contrasting_heads(shares: np.ndarray) -> tuple[tuple[int, int], tuple[int, int]]:
    """((layer, head) of the highest share, (layer, head) of the lowest share in that
    layer), counted from 1; shares float [layers, heads]."""
    layer, head = np.unravel_index(int(np.argmax(shares)), shares.shape)
    other = int(np.argmin(shares[layer]))
    return (int(layer) + 1, int(head) + 1), (int(layer) + 1, other + 1)


def _draw(model, tokenizer, decoding, cases, choices, best, other, figure_dir,
          overwrite: bool) -> dict:
    """Figures of the two heads for the first case `best` gets right and `other` wrong
    (else the first case); returns the sentence and the files."""
    from transformer_tf.visualization.figures import write_figures
    from transformer_tf.visualization.maps import sentence_maps

    (layer, best_head), (_, other_head) = best, other
    index = next((i for i, ((case, _), chosen) in enumerate(zip(cases, choices))
                  if chosen[layer - 1, best_head - 1] == case.antecedent
                  and chosen[layer - 1, other_head - 1] != case.antecedent), 0)
    case, german = cases[index]
    sentence = " ".join(case.words)
    maps = sentence_maps(model, tokenizer, sentence, german, decoding)
    out = pathlib.Path(figure_dir)
    heads = (best_head, other_head)
    paths = write_figures(maps, out, kind="encoder", layer=layer, heads=heads,
                          overwrite=overwrite)
    paths += write_figures(maps, out / "from_pronoun", kind="encoder", layer=layer,
                           heads=heads, word=case.words[case.pronoun], overwrite=overwrite)
    return {"sentence": sentence, "pronoun": case.words[case.pronoun],
            "antecedent": case.words[case.antecedent], "files": [str(p) for p in paths]}


def measure(options: PronounHeadsOptions) -> dict:
    """Run the measurement (module doc) and write the results file; returns its content.
    Outputs already there are refused first (`check_outputs`)."""
    check_outputs(options)
    cases = read_cases(options.data_dir, options.splits)
    if not cases:
        raise ValueError(f"no sentence of the splits {list(options.splits)} has a possessive "
                         "with an antecedent")
    pronouns = [case.pronoun for case, _ in cases]
    antecedents = [case.antecedent for case, _ in cases]
    baseline = positional_baseline(pronouns, antecedents, [len(c.words) for c, _ in cases])
    values = {"cases": len(cases), "baseline_offset": baseline.offset,
              "baseline_share": round(baseline.share, 3)}
    rows, figure = [], None
    headline = ("{cases} pronouns; best fixed offset {baseline_offset:+d} words: share "
                "{baseline_share:.3f}; heads not measured yet")
    if not options.baseline_only:
        from transformer_tf.inference.attention import load_model
        from transformer_tf.inference.pronoun_attention import pronoun_rows

        model, tokenizer, decoding = load_model(options.model_dir, options.saved_model,
                                                options.checkpoint)
        attention = pronoun_rows(model, tokenizer, [c for c, _ in cases], options.batch_size)
        choices = np.stack([strongest_other_word(rows, case.pronoun)
                            for rows, (case, _) in zip(attention, cases)])
        hits = head_hits(choices, antecedents)
        shares = hits / len(cases)
        best, other = contrasting_heads(shares)
        rows = [{"layer": layer + 1, "head": head + 1,
                 "share": round(float(shares[layer, head]), 3),
                 "hits": int(hits[layer, head])}
                for layer in range(shares.shape[0]) for head in range(shares.shape[1])]
        values.update({"best_layer": best[0], "best_head": best[1],
                       "best_share": round(float(shares[best[0] - 1, best[1] - 1]), 3),
                       "other_head": other[1],
                       "other_share": round(float(shares[other[0] - 1, other[1] - 1]), 3),
                       "layers": shares.shape[0], "heads": shares.shape[1]})
        paired = head_against_offset(choices[:, best[0] - 1, best[1] - 1],
                                     pronouns, antecedents, baseline.offset)
        values.update({"best_only": paired.head_only, "offset_only": paired.offset_only,
                       "best_vs_offset_p": round(paired.p_value, 4)})
        headline = ("{cases} pronouns: layer {best_layer} head {best_head} attends most to "
                    "the antecedent in a share {best_share:.3f}; the best fixed offset "
                    "({baseline_offset:+d} words) {baseline_share:.3f}; right where the "
                    "offset is wrong in {best_only} cases, the reverse in {offset_only} "
                    "(sign test p {best_vs_offset_p})")
        if options.figure_dir is not None:
            figure = _draw(model, tokenizer, decoding, cases, choices, best, other,
                           options.figure_dir, options.overwrite)
    measured_on = (f"model {options.model_dir or options.saved_model}" if not options.baseline_only
                   else "no model (the cases and the baseline only)")
    document = {
        "what": (f"Multi30k English ({', '.join(options.splits)}): for each possessive "
                 "pronoun with an antecedent by the rule of transformer_tf/data/"
                 "possessives.py, the share whose strongest encoder self-attention (words, "
                 "the pronoun itself left out) goes to the antecedent, per layer and head, "
                 f"against the best fixed offset; {measured_on}"),
        "title": "Pronoun heads: encoder self-attention to the antecedent",
        "command": options.command, "short_command": "python scripts/pronoun_heads.py ...",
        "commit": current_commit(), "commit_role": "measured", "machine": machine_description(),
        "date": datetime.date.today().isoformat(),
        "source": "this file, written by transformer_tf/jobs/pronoun_heads.py",
        "values": values, "units": {}, "headline": headline,
        "columns": COLUMNS, "rows": rows,
    }
    if figure is not None:
        document["figure"] = figure
    path = pathlib.Path(options.results)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    return document
