"""Attention figures with matplotlib (the optional `viz` extra: `pip install -e .[viz]`).

Three kinds, each a `matplotlib.figure.Figure` (no pyplot state, any thread):

  * `lines_figure`: the paper's Figures 3-5: the query tokens in a row at the top, the
    key tokens in a row at the bottom, a line from each query (or one chosen query) to
    each key it attends to, its opacity the weight, one colour per head.
  * `heatmap_grid`: one heat map (queries x keys, tokens as tick labels) per head, all
    heads of one layer in a grid.
  * `alignment_figure`: one matrix, target tokens x source tokens (the encoder-decoder
    attention of a translation, averaged over the chosen heads).

Text is set in DejaVu Sans (it ships with matplotlib and covers Latin, Greek and
Cyrillic, so German and French words render). Figures have a fixed size in inches
(derived from the token counts, or given), and are saved without "tight" cropping, so
a PNG is exactly size x dpi pixels.
"""
from __future__ import annotations

import io
import math
import pathlib
import textwrap

import numpy as np

FONT = "DejaVu Sans"
DEFAULT_DPI = 100
# Lines lighter than this are not drawn (they would be invisible and bloat the file).
MIN_LINE_WEIGHT = 0.02
_INCHES_PER_TOKEN = 0.3
_INCHES_PER_LABEL_CHARACTER = 0.085


def _matplotlib():
    """matplotlib, imported on first use, with a clear message when it is missing."""
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError as error:
        raise ImportError(
            "attention figures need matplotlib: pip install -e '.[viz]' (or pip install "
            "matplotlib)") from error
    return matplotlib


def check_matplotlib():
    """Raises ImportError with the install command when matplotlib is missing."""
    _matplotlib()


def _figure(size_inches, layout="constrained"):
    matplotlib = _matplotlib()
    from matplotlib.figure import Figure
    with matplotlib.rc_context({"font.family": FONT}):
        return Figure(figsize=size_inches, layout=layout)


def _title_width(width_inches: float) -> int:
    """Characters of a 9 pt title line in `width_inches` (about 13 per inch)."""
    return max(20, int(width_inches * 13))


def _title(figure, title: str, width_inches=None):
    """A suptitle wrapped to the figure's width (or to `width_inches`)."""
    if title:
        width = _title_width(width_inches or figure.get_size_inches()[0])
        # Constrained layout makes room for a suptitle only at its default place.
        place = {} if figure.get_layout_engine() is not None else {"y": 1.0, "va": "top"}
        figure.suptitle(textwrap.fill(title, width), fontfamily=FONT, fontsize=9, **place)


def head_colours(num_heads: int) -> list:
    """One colour per head (matplotlib's tab10, then tab20 for more than 10 heads)."""
    matplotlib = _matplotlib()
    cmap = matplotlib.colormaps["tab10" if num_heads <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(num_heads)]


def _label_inches(labels) -> float:
    return _INCHES_PER_LABEL_CHARACTER * max((len(label) for label in labels), default=1)


def _check(weights, rank, query_tokens, key_tokens):
    weights = np.asarray(weights, np.float32)
    if weights.ndim != rank:
        raise ValueError(f"weights: expected rank {rank}, got shape {weights.shape}")
    if weights.shape[-2:] != (len(query_tokens), len(key_tokens)):
        raise ValueError(f"weights {weights.shape[-2:]} do not match {len(query_tokens)} query "
                         f"and {len(key_tokens)} key tokens")
    return weights


# ---------------------------------------------------------------------- lines
def lines_figure(query_tokens, key_tokens, weights, head_names, query_index=None,
                 title: str = "", size_inches=None):
    """Lines from query tokens (top row) to key tokens (bottom row).

    Args:
      query_tokens, key_tokens: labels (str), Q and K of them.
      weights: [heads, Q, K], rows summing to 1.
      head_names: one label per head for the legend (e.g. "head 5").
      query_index: draw only the lines of this query (its label is in bold); None: all.
      title: figure title.
      size_inches: (width, height); default: 0.3 inch per token, room for the labels.
    """
    weights = _check(weights, 3, query_tokens, key_tokens)
    if len(head_names) != weights.shape[0]:
        raise ValueError(f"{len(head_names)} head names for {weights.shape[0]} heads")
    if size_inches is None:
        label = _label_inches(list(query_tokens) + list(key_tokens))
        width = max(3.0, _INCHES_PER_TOKEN * max(len(query_tokens), len(key_tokens)) + 1.5)
        size_inches = (width, 2.5 + 2 * label)
    figure = _figure(size_inches)
    axes = figure.add_subplot()
    axes.set_axis_off()
    span = max(len(query_tokens), len(key_tokens), 2) - 1

    def xs(count):  # both rows spread over the same width; a lone token in the middle
        return np.array([span / 2]) if count == 1 else np.linspace(0.0, span, count)

    query_x, key_x = xs(len(query_tokens)), xs(len(key_tokens))
    queries = range(len(query_tokens)) if query_index is None else [query_index]
    colours = head_colours(weights.shape[0])
    for head, colour in enumerate(colours):
        for q in queries:
            for k in np.flatnonzero(weights[head, q] >= MIN_LINE_WEIGHT):
                axes.plot([query_x[q], key_x[k]], [1.0, 0.0], color=colour,
                          alpha=float(min(1.0, weights[head, q, k])),
                          linewidth=0.5 + 2.5 * float(weights[head, q, k]),
                          solid_capstyle="round")
    for index, (x, token) in enumerate(zip(query_x, query_tokens)):
        axes.text(x, 1.03, token, rotation=90, ha="center", va="bottom", fontfamily=FONT,
                  fontsize=9, fontweight="bold" if index == query_index else "normal")
    for x, token in zip(key_x, key_tokens):
        axes.text(x, -0.03, token, rotation=90, ha="center", va="top", fontfamily=FONT,
                  fontsize=9)
    axes.set_xlim(-0.5, span + 0.5)
    axes.set_ylim(0.0, 1.0)
    handles = [axes.plot([], [], color=c, linewidth=2)[0] for c in colours]
    figure.legend(handles, head_names, loc="outside lower center", frameon=False,
                  ncols=min(len(head_names), 8), prop={"family": FONT, "size": 8})
    _title(figure, title)
    return figure


# ---------------------------------------------------------------------- heat maps
def _heatmap(axes, query_tokens, key_tokens, weights, title):
    image = axes.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto",
                        interpolation="nearest")
    axes.set_xticks(range(len(key_tokens)), key_tokens, rotation=90, fontfamily=FONT,
                    fontsize=8)
    axes.set_yticks(range(len(query_tokens)), query_tokens, fontfamily=FONT, fontsize=8)
    axes.tick_params(length=0)
    axes.set_title(title, fontfamily=FONT, fontsize=9)
    return image


def heatmap_grid(query_tokens, key_tokens, weights, head_names, title: str = "",
                 size_inches=None):
    """One heat map per head (rows: queries, columns: keys; colour 0..1), in a grid of
    ceil(sqrt(heads)) columns with one colour bar.

    The panels are placed by hand (margins from the label lengths) rather than by
    matplotlib's constrained layout, which took about 40% of the drawing time; this
    figure is drawn at every validation for TensorBoard.

    Args: as `lines_figure` (weights [heads, Q, K]).
    """
    weights = _check(weights, 3, query_tokens, key_tokens)
    heads = weights.shape[0]
    if len(head_names) != heads:
        raise ValueError(f"{len(head_names)} head names for {heads} heads")
    columns = math.ceil(math.sqrt(heads))
    rows = math.ceil(heads / columns)
    # The natural layout in inches; a given size scales it.
    panel_w, panel_h = max(0.22 * len(key_tokens), 0.7), max(0.22 * len(query_tokens), 0.7)
    left, bottom = _label_inches(query_tokens) + 0.2, _label_inches(key_tokens) + 0.15
    cell_w, cell_h = left + panel_w + 0.15, bottom + panel_h + 0.3  # 0.3: the head's name
    natural_w = columns * cell_w + 0.9  # the colour bar and its labels
    title_lines = len(textwrap.wrap(title, _title_width(natural_w))) if title else 0
    title_h = 0.2 * title_lines + 0.1
    natural_h = rows * cell_h + title_h
    figure = _figure(size_inches or (natural_w, natural_h), layout=None)
    image = None
    for index in range(heads):
        row, column = divmod(index, columns)
        axes = figure.add_axes([(column * cell_w + left) / natural_w,
                                (natural_h - title_h - (row + 1) * cell_h + bottom) / natural_h,
                                panel_w / natural_w, panel_h / natural_h])
        image = _heatmap(axes, query_tokens, key_tokens, weights[index], head_names[index])
    colour_bar = figure.add_axes([(columns * cell_w + 0.15) / natural_w,
                                  (natural_h - title_h - cell_h + bottom) / natural_h,
                                  0.12 / natural_w, panel_h / natural_h])
    figure.colorbar(image, cax=colour_bar)
    colour_bar.tick_params(labelsize=7)
    _title(figure, title, width_inches=natural_w)
    return figure


def alignment_figure(target_tokens, source_tokens, weights, title: str = "",
                     size_inches=None):
    """The encoder-decoder attention of one translation as one matrix.

    Args:
      target_tokens: row labels (the output tokens), T of them.
      source_tokens: column labels, S of them.
      weights: [T, S] (e.g. averaged over heads).
    """
    weights = _check(weights, 2, target_tokens, source_tokens)
    if size_inches is None:
        size_inches = (max(3.0, 0.3 * len(source_tokens) + _label_inches(target_tokens) + 1.4),
                       max(2.5, 0.3 * len(target_tokens) + _label_inches(source_tokens) + 0.6))
    figure = _figure(size_inches)
    axes = figure.add_subplot()
    image = _heatmap(axes, target_tokens, source_tokens, weights, "")
    axes.set_xlabel("source", fontfamily=FONT, fontsize=9)
    axes.set_ylabel("target", fontfamily=FONT, fontsize=9)
    figure.colorbar(image, ax=axes, shrink=0.8)
    _title(figure, title)
    return figure


# ---------------------------------------------------------------------- output
def png_bytes(figure, dpi: int = DEFAULT_DPI) -> bytes:
    """The figure as PNG bytes (size_inches x dpi pixels)."""
    matplotlib = _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(figure)
    out = io.BytesIO()
    with matplotlib.rc_context({"font.family": FONT}):
        figure.savefig(out, format="png", dpi=dpi)
    return out.getvalue()


def save_png(figure, path, dpi: int = DEFAULT_DPI) -> pathlib.Path:
    """Writes the figure to `path` (parent directories created); returns the path."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(figure, dpi))
    return path
