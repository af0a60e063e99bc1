"""Attention figures: PNG files that decode, of the size asked for, for sentences with
German/French characters and for one-token sentences; `sentence_maps` over a real model
and tokenizer; scripts/attention.py end to end."""
from __future__ import annotations

import dataclasses
import struct
import warnings

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.visualization import plots
from transformer_tf.visualization.figures import heatmap_pngs, write_figures
from transformer_tf.visualization.maps import AttentionMaps, view

SOURCE = ["▁Ein", "▁Mädchen", "▁mit", "▁Fuß", "ball", "▁à", "▁l", "'", "été", "</s>"]
TARGET = ["<s>", "▁Une", "▁fille", "▁très", "▁agé", "e"]


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from the PNG signature and IHDR chunk, after decoding it all."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    image = tf.io.decode_png(data, channels=4)  # fails on a corrupt file
    assert tuple(image.shape) == (height, width, 4)
    return width, height


def random_maps(source, target, layers=2, heads=3, seed=0) -> AttentionMaps:
    rng = np.random.default_rng(seed)

    def probabilities(q, k, causal=False):
        logits = rng.normal(size=(layers, heads, q, k)) * 2
        if causal:
            logits = np.where(np.tril(np.ones((q, k), bool)), logits, -np.inf)
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)

    s, t = len(source), len(target)
    return AttentionMaps(source_pieces=source, target_pieces=target,
                         output_pieces=target[1:] + ["</s>"],
                         weights={"encoder": probabilities(s, s),
                                  "decoder": probabilities(t, t, causal=True),
                                  "cross": probabilities(t, s)})


@pytest.fixture
def no_missing_glyphs():
    """Fails the test if matplotlib warns that a character is missing from the font."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    missing = [str(w.message) for w in caught if "missing from" in str(w.message)]
    assert not missing, missing


def test_figures_have_the_requested_pixel_size():
    shown = view(random_maps(SOURCE, TARGET), "cross", layer=1)
    figures = [
        plots.lines_figure(shown.query_labels, shown.key_labels, shown.weights,
                           shown.head_names, size_inches=(4, 3)),
        plots.heatmap_grid(shown.query_labels, shown.key_labels, shown.weights,
                           shown.head_names, size_inches=(4, 3)),
        plots.alignment_figure(shown.query_labels, shown.key_labels, shown.weights.mean(0),
                               size_inches=(4, 3)),
    ]
    for figure in figures:
        assert png_size(plots.png_bytes(figure, dpi=50)) == (200, 150)


def test_default_size_grows_with_the_sentence():
    def size(tokens):
        weights = np.full((2, len(tokens), len(tokens)), 1 / len(tokens), np.float32)
        return png_size(plots.png_bytes(
            plots.heatmap_grid(tokens, tokens, weights, ["head 1", "head 2"]), dpi=40))

    short, long = size(list("abc")), size(list("abcdefghijklmnopqrst"))
    assert long[0] > short[0] and long[1] > short[1]


@pytest.mark.parametrize("kind", ["encoder", "cross"])
def test_write_figures_with_german_and_french_characters(kind, tmp_path, no_missing_glyphs):
    maps = random_maps(SOURCE, TARGET)
    paths = write_figures(maps, tmp_path, kind=kind, layer=2, heads=[1, 3],
                          word="Mädchen" if kind == "encoder" else None, dpi=40)
    names = [p.name for p in paths]
    assert names == [f"lines_{kind}_layer2.png", f"heatmaps_{kind}_layer2.png",
                     "alignment_layer2.png"]
    for path in paths:
        width, height = png_size(path.read_bytes())
        assert width > 40 and height > 40


def test_figures_already_there_are_kept_unless_overwrite(tmp_path, no_missing_glyphs):
    """A second sentence drawn into the same directory stops before writing anything,
    naming the files it would replace; with overwrite it replaces them."""
    first = write_figures(random_maps(SOURCE, TARGET), tmp_path, kind="cross", dpi=30)
    held = {path: path.read_bytes() for path in first}
    other = random_maps(SOURCE[:3] + ["</s>"], TARGET, seed=1)
    with pytest.raises(FileExistsError) as refused:
        write_figures(other, tmp_path, kind="cross", dpi=30)
    assert str(refused.value).startswith(", ".join(map(str, first)) + ": already there")
    assert {path: path.read_bytes() for path in first} == held
    # Another kind shares only the alignment picture: still refused, still nothing written.
    with pytest.raises(FileExistsError, match=r"^\S*alignment_layer2.png: already there"):
        write_figures(other, tmp_path, kind="encoder", dpi=30)
    assert sorted(tmp_path.iterdir()) == sorted(first)
    again = write_figures(other, tmp_path, kind="cross", dpi=30, overwrite=True)
    assert again == first
    assert all(path.read_bytes() != held[path] for path in first)


@pytest.mark.parametrize("source, target, kind, merge", [
    (["</s>"], ["<s>"], "cross", False),  # nothing but the specials
    (["▁Ça", "</s>"], ["<s>", "▁Öl"], "decoder", True),  # one word each
])
def test_one_token_sentences(source, target, kind, merge, tmp_path, no_missing_glyphs):
    maps = random_maps(source, target, layers=1, heads=2)
    paths = write_figures(maps, tmp_path, kind=kind, merge_words=merge, dpi=30)
    assert len(paths) == 3
    assert all(png_size(p.read_bytes()) for p in paths)


def test_view_and_word_errors_name_the_problem():
    maps = random_maps(SOURCE, TARGET)
    with pytest.raises(ValueError, match="layers 1..2"):
        view(maps, "encoder", layer=3)
    with pytest.raises(ValueError, match="heads 1..3"):
        view(maps, "encoder", heads=[0])
    with pytest.raises(ValueError, match="not among the encoder queries"):
        view(maps, "encoder").query_index("Hund")
    assert view(maps, "encoder", merge_words=False).query_index("Fuß") == 3
    only_cross = AttentionMaps(SOURCE, TARGET, TARGET[1:] + ["</s>"],
                               {"cross": maps.weights["cross"]})
    with pytest.raises(ValueError, match="no 'encoder' attention"):
        view(only_cross, "encoder")


def test_tensorboard_pngs_one_per_layer_of_equal_size():
    maps = random_maps(SOURCE, TARGET, layers=2)
    only_some = dataclasses.replace(maps, weights={k: maps.weights[k] for k in ("cross",)})
    images = heatmap_pngs(only_some, dpi=30)
    assert set(images) == {"cross"}  # the kinds the model has
    assert len(images["cross"]) == 2
    assert len({png_size(png) for png in images["cross"]}) == 1


# ---------------------------------------------------------------------- a real model
def test_sentence_maps_from_search_and_given_target(random_weights_run):
    from transformer_tf.inference.attention import load_model
    from transformer_tf.visualization.maps import sentence_maps

    model, tokenizer, decoding = load_model(model_dir=random_weights_run)
    searched = sentence_maps(model, tokenizer, "Zwei Mädchen spielen am Strand.", None,
                             decoding)
    given = sentence_maps(model, tokenizer, "Zwei Mädchen spielen am Strand.",
                          "Two girls play on the beach.")
    assert searched.from_search and not given.from_search
    for maps in (searched, given):
        s, t = len(maps.source_pieces), len(maps.target_pieces)
        assert maps.source_pieces[-1] == "</s>" and maps.target_pieces[0] == "<s>"
        assert maps.output_pieces[:-1] == maps.target_pieces[1:]
        assert given.output_pieces[-1] == "</s>"
        assert maps.weights["encoder"].shape == (2, 2, s, s)
        assert maps.weights["decoder"].shape == (2, 2, t, t)
        assert maps.weights["cross"].shape == (2, 2, t, s)
    one = sentence_maps(model, tokenizer, "Hallo", "Hi")
    assert one.weights["cross"].shape[-1] == len(one.source_pieces) >= 2
    with pytest.raises(ValueError, match="empty"):
        sentence_maps(model, tokenizer, "  ", "Hi")


def load_script():
    from transformer_tf.cli import attention

    return attention


def test_script_writes_the_three_figures(random_weights_run, tmp_path, capsys):
    script = load_script()
    code = script.main(["--model-dir", str(random_weights_run), "--text", "Ein Mädchen à l'été",
                        "--kind", "cross", "--layer", "1", "--heads", "2", "--dpi", "30",
                        "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("translation:")
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["alignment_layer1.png", "heatmaps_cross_layer1.png",
                       "lines_cross_layer1.png"]
    assert all(str(tmp_path / name) in out for name in written)
    for name in written:
        png_size((tmp_path / name).read_bytes())
    # Again into the same --out: stopped, naming the files; --overwrite replaces them.
    held = {name: (tmp_path / name).read_bytes() for name in written}
    argv = ["--model-dir", str(random_weights_run), "--text", "Zwei Hunde", "--kind", "cross",
            "--layer", "1", "--dpi", "30", "--out", str(tmp_path)]
    assert script.main(argv) == 2
    assert "already there" in capsys.readouterr().err
    assert {name: (tmp_path / name).read_bytes() for name in written} == held
    assert script.main([*argv, "--overwrite"]) == 0
    assert all((tmp_path / name).read_bytes() != held[name] for name in written)


def test_script_errors_exit_2(random_weights_run, tmp_path, capsys):
    script = load_script()
    base = ["--model-dir", str(random_weights_run), "--text", "Hallo", "--target", "Hallo",
            "--out", str(tmp_path)]
    assert script.main(base + ["--layer", "7"]) == 2
    assert "layers 1..2" in capsys.readouterr().err
    assert script.main(base + ["--word", "Hund"]) == 2
    assert "not among the encoder queries" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        script.main(base + ["--heads", "one"])
    assert stop.value.code == 2
    assert not list(tmp_path.iterdir())
