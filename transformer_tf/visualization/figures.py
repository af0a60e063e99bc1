"""The figure files of one sentence pair, and the images TensorBoard shows.

`write_figures` writes, for one kind of attention and one layer:
  lines_<kind>_layer<L>.png     the paper's Figure 3-5 view (lines between two copies of
                                the sentence, one colour per head; from one word or all);
  heatmaps_<kind>_layer<L>.png  one heat map per head, all chosen heads in a grid;
  alignment_layer<L>.png        the encoder-decoder attention as a target x source
                                matrix, averaged over heads (with --kind cross: the
                                chosen layer and heads; otherwise the last decoder layer,
                                all heads); only for models with "cross" attention.
"""
from __future__ import annotations

import pathlib

from transformer_tf.runtime.outputs import refuse_existing
from transformer_tf.visualization import plots
from transformer_tf.visualization.maps import AttentionMaps, View, view

KIND_NAMES = {"encoder": "encoder self-attention", "decoder": "decoder self-attention",
              "cross": "encoder-decoder attention"}


def title_of(maps: AttentionMaps, shown: View, extra: str = "") -> str:
    target = "the model's translation" if maps.from_search else "the given target"
    unit = "words (pieces merged)" if shown.merged else "BPE pieces"
    parts = [f"{KIND_NAMES[shown.kind]}, layer {shown.layer} of {maps.num_layers(shown.kind)}"]
    if shown.kind != "encoder":
        parts.append(f"target: {target}")
    parts.append(unit)
    return "; ".join(parts + ([extra] if extra else []))


def write_figures(maps: AttentionMaps, out_dir, kind: str = "encoder", layer=None,
                  heads=None, word: str | None = None, merge_words: bool = True,
                  dpi: int = plots.DEFAULT_DPI, overwrite: bool = False) -> list:
    """Writes the figures (see the module docstring) into `out_dir`; returns their paths.

    Their names depend only on the kind and the layer, so a figure of another sentence
    would take an earlier one's place: unless `overwrite`, FileExistsError names the
    files already there, before anything is written.

    Args:
      maps: the sentence pair's attention.
      kind: "encoder", "decoder" or "cross".
      layer: from 1; None = the last layer.
      heads: iterable of head numbers from 1; None = all heads.
      word: the lines figure shows only this query word's lines (first occurrence);
        None = all words.
      merge_words: label words (pieces merged, see `visualization.words`) or pieces.
      dpi: pixels per inch of the PNGs.
      overwrite: replace figures of the same names in `out_dir`.
    """
    out_dir = pathlib.Path(out_dir)
    shown = view(maps, kind, layer, heads, merge_words)
    query = shown.query_index(word) if word else None
    extra = f"from {shown.query_labels[query]!r}" if query is not None else ""
    stem = f"{kind}_layer{shown.layer}"
    aligned = None
    if "cross" in maps.weights:
        aligned = shown if kind == "cross" else view(maps, "cross", merge_words=merge_words)
    paths = [out_dir / f"lines_{stem}.png", out_dir / f"heatmaps_{stem}.png"]
    if aligned is not None:
        paths.append(out_dir / f"alignment_layer{aligned.layer}.png")
    if not overwrite:
        refuse_existing(paths, "give another --out, or --overwrite to replace them (the "
                               "names depend only on the kind and the layer)")
    plots.save_png(plots.lines_figure(shown.query_labels, shown.key_labels, shown.weights,
                                      shown.head_names, query, title_of(maps, shown, extra)),
                   paths[0], dpi)
    plots.save_png(plots.heatmap_grid(shown.query_labels, shown.key_labels, shown.weights,
                                      shown.head_names, title_of(maps, shown)), paths[1], dpi)
    if aligned is not None:
        heads_note = ("all heads" if len(aligned.heads) == maps.num_heads("cross")
                      else "heads " + ",".join(map(str, aligned.heads)))
        figure = plots.alignment_figure(aligned.query_labels, aligned.key_labels,
                                        aligned.weights.mean(axis=0),
                                        title_of(maps, aligned, f"mean of {heads_note}"))
        plots.save_png(figure, paths[2], dpi)
    return paths


def heatmap_pngs(maps: AttentionMaps, merge_words: bool = True, dpi: int = 72) -> dict:
    """For TensorBoard: kind -> one PNG (bytes) per layer, first layer first, each the heat
    maps of all heads of that layer (same size within a kind)."""
    images = {}
    for kind in maps.weights:
        images[kind] = []
        for layer in range(1, maps.num_layers(kind) + 1):
            shown = view(maps, kind, layer, merge_words=merge_words)
            figure = plots.heatmap_grid(shown.query_labels, shown.key_labels, shown.weights,
                                        shown.head_names, title_of(maps, shown))
            images[kind].append(plots.png_bytes(figure, dpi))
    return images
