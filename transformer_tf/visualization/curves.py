"""Dev BLEU against training progress, one line per run (the Table 2 study's figure).

A curve is a list of (x, dev BLEU) points read from a run's validation log
(`rundir.validation_log`): x is training minutes for the equal-time arm, passes over the
training data for the equal-tokens arm. Each family has one colour, each seed one line
style, so two seeds of one family read as a band. matplotlib comes from the optional
`viz` extra and is imported only when drawing (`plots.check_matplotlib`).
"""
from __future__ import annotations

import dataclasses

from transformer_tf.visualization import plots

FAMILY_COLOURS = {"transformer": "tab:blue", "convs2s": "tab:orange"}
SEED_STYLES = ("-", "--", ":", "-.")


@dataclasses.dataclass(frozen=True)
class Curve:
    """One run's dev BLEU over training: `points` [(x, BLEU)], x increasing."""

    family: str
    seed: int
    points: tuple


@dataclasses.dataclass(frozen=True)
class Panel:
    """One axes of the figure: its curves and what its x axis counts."""

    title: str
    x_label: str
    curves: tuple


def curves_figure(panels: list[Panel], title: str = ""):
    """A matplotlib Figure with the panels side by side (5 x 3.6 inches each); y is
    dev BLEU, shared by the panels. An empty curve is left out."""
    plots.check_matplotlib()
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.0 * len(panels), 3.6), layout="constrained")
    axes_list = figure.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    seeds = sorted({c.seed for p in panels for c in p.curves})
    for axes, panel in zip(axes_list, panels):
        for curve in panel.curves:
            if not curve.points:
                continue
            xs, ys = zip(*curve.points)
            axes.plot(xs, ys, color=FAMILY_COLOURS.get(curve.family, "tab:gray"),
                      linestyle=SEED_STYLES[seeds.index(curve.seed) % len(SEED_STYLES)],
                      marker="o", markersize=2.5, linewidth=1.2,
                      label=f"{curve.family}, seed {curve.seed}")
        axes.set_title(panel.title, fontsize=9)
        axes.set_xlabel(panel.x_label)
        axes.grid(alpha=0.3)
        if any(c.points for c in panel.curves):
            axes.legend(fontsize=7)
    axes_list[0].set_ylabel("dev BLEU")
    if title:
        figure.suptitle(title, fontsize=9)
    return figure


def save_curves_png(panels: list[Panel], path, title: str = ""):
    """Draw `curves_figure(panels, title)` and write it to `path` as a PNG."""
    return plots.save_png(curves_figure(panels, title), path)
