"""The columns of the Table 3 study and its verdicts: perplexity, where the dev loss
flattened, and whether each row's change in dev perplexity shows the paper's direction
beyond the base row's seed spread."""
from __future__ import annotations

import math


def perplexity(nll: float) -> float:
    """Perplexity from the mean negative log-likelihood in nats per target token:
    exp(nll) (e.g. ln 4 nats per token: perplexity 4)."""
    return math.exp(nll)


def flattening_step(points, tolerance: float = 0.01) -> int | None:
    """The first evaluated step from which the dev loss has flattened: every later loss
    is at least (1 - tolerance) x its loss, i.e. it improves by less than `tolerance`
    (relative) for the rest of the run. `points`: [(step, dev NLL)] in step order.
    None when no point has a later one (nothing can be said) or none qualifies."""
    points = sorted(points)
    for index, (step, loss) in enumerate(points[:-1]):
        if min(later for _, later in points[index + 1:]) >= (1.0 - tolerance) * loss:
            return step
    return None


# The paper's direction of each kind of change, in dev perplexity (Table 3), relative to
# its base (4.92): "higher", "lower" or "same" (within 0.05, the table's rounding noise).
PAPER_DIRECTIONS = {
    "A: fewer heads": ("higher", "h=1: 5.29, h=4: 5.00"),
    "A: more heads": ("same", "h=16: 4.91"),
    "B: smaller d_k": ("higher", "d_k=16: 5.16, d_k=32: 5.01"),
    "C: fewer layers": ("higher", "N=2: 6.11, N=4: 5.19"),
    "C: more layers": ("lower", "N=8: 4.88"),
    "C: narrower": ("higher", "d_model=256: 5.75"),
    "C: wider": ("lower", "d_model=1024: 4.66"),
    "C: smaller d_ff": ("higher", "d_ff=1024: 5.12"),
    "C: larger d_ff": ("lower", "d_ff=4096: 4.75"),
    "D: no dropout": ("higher", "P_drop=0.0: 5.77"),
    "D: more dropout": ("same", "P_drop=0.2: 4.95"),
    "D: no label smoothing": ("lower", "eps_ls=0.0: 4.67"),
    "D: more label smoothing": ("higher", "eps_ls=0.2: 5.47"),
    "E: learned positions": ("same", "4.92"),
    "big": ("lower", "4.33"),
}


def change_kind(row: dict, base: dict) -> str | None:
    """The PAPER_DIRECTIONS key of a result row against the base row's result (None for
    a base row)."""
    m, b = row["model"], base["model"]
    if row["group"] == "base":
        return None
    if row["group"] == "big":
        return "big"
    if row["group"] == "E":
        return "E: learned positions"
    if row["group"] == "A":
        return "A: fewer heads" if m["num_heads"] < b["num_heads"] else "A: more heads"
    if row["group"] == "B":
        return "B: smaller d_k"
    if row["group"] == "C":
        for key, less, more in (("num_layers", "fewer layers", "more layers"),
                                ("d_model", "narrower", "wider"),
                                ("d_ff", "smaller d_ff", "larger d_ff")):
            if m[key] != b[key]:
                return f"C: {less if m[key] < b[key] else more}"
    if m["dropout"] != b["dropout"]:
        return "D: no dropout" if m["dropout"] == 0 else "D: more dropout"
    return ("D: no label smoothing" if row["label_smoothing"] == 0
            else "D: more label smoothing")


def verdict(difference: float, noise: float, paper_direction: str) -> str:
    """Whether a row's dev perplexity difference from the base (row - base) shows the
    paper's direction: "reproduced", "not reproduced" or "within noise".

    `noise` is the base row's seed spread (max - min perplexity over its seeds). A
    difference of at most `noise` is "within noise" when the paper saw a change, and
    "reproduced" when the paper saw none ("same"); a larger one is "reproduced" when its
    sign is the paper's and "not reproduced" otherwise (for "same", any)."""
    if paper_direction not in ("higher", "lower", "same"):
        raise ValueError(f"paper_direction: expected higher, lower or same, got "
                         f"{paper_direction!r}")
    if abs(difference) <= noise:
        return "reproduced" if paper_direction == "same" else "within noise"
    if paper_direction == "same":
        return "not reproduced"
    return "reproduced" if (difference > 0) == (paper_direction == "higher") else "not reproduced"


def verdicts(results: list[dict]) -> dict:
    """{"base_perplexity", "noise", "base_seeds", "rows": [{row, kind, paper_direction,
    paper, difference, verdict}]}: every row against the mean of the base rows, with
    their spread as the noise (0 with one base row: then every difference counts)."""
    bases = [r for r in results if r["group"] == "base"]
    if not bases:
        return {"rows": []}
    base_ppl = [r["dev_perplexity"] for r in bases]
    mean = sum(base_ppl) / len(base_ppl)
    noise = max(base_ppl) - min(base_ppl)
    rows = []
    for r in results:
        kind = change_kind(r, bases[0])
        if kind is None:
            continue
        direction, paper = PAPER_DIRECTIONS[kind]
        difference = r["dev_perplexity"] - mean
        rows.append({"row": r["row"], "kind": kind, "paper_direction": direction,
                     "paper": paper, "difference": difference,
                     "verdict": verdict(difference, noise, direction)})
    return {"base_perplexity": mean, "noise": noise, "base_seeds": len(bases), "rows": rows}


def format_verdicts(summary: dict) -> str:
    if not summary["rows"]:
        return ""
    lines = ["", (f"Base dev PPL {summary['base_perplexity']:.2f} (mean of "
                  f"{summary['base_seeds']} seed(s); spread {summary['noise']:.3f}, the "
                  "noise)."),
             "", ("| row | change | paper (PPL, base 4.92) | paper direction | ours - base | "
                  "verdict |"), "| --- | --- | --- | --- | ---: | --- |"]
    for v in summary["rows"]:
        lines.append(f"| {v['row']} | {v['kind']} | {v['paper']} | {v['paper_direction']} | "
                     f"{v['difference']:+.2f} | {v['verdict']} |")
    return "\n".join(lines) + "\n"
