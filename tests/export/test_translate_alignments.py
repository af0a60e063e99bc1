"""translate --alignments / --replace-unk (`cli.translate`) in this process, over a run's
checkpoint: a tab and Pharaoh pairs after each translation, the same as the library's
`Aligner` gives for (source, output); refused with --n-best above 1."""
import io
import sys

from transformer_tf.cli.translate import main
from transformer_tf.inference.alignment import load_aligner

SOURCES = ["A man is riding a bicycle.", "", "Two dogs play in the snow."]


def run(argv, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(
        "".join(s + "\n" for s in SOURCES).encode())))
    try:
        status = main(argv)
    except SystemExit as stop:
        status = stop.code
    return (status, *capsys.readouterr())


def test_alignments_follow_each_translation(tiny_run, capsys, monkeypatch):
    status, out, err = run(["--model-dir", str(tiny_run), "--quiet", "--scores",
                            "--beam-size", "1", "--alignments", "--alignment-layer", "1",
                            "--replace-unk"], capsys, monkeypatch)
    assert status == 0, err
    lines = out.split("\n")[:-1]
    assert len(lines) == len(SOURCES)
    outputs, pharaoh = [], []
    for source, line in zip(SOURCES, lines):
        translation, score, links = line.split("\t")
        float(score)
        outputs.append(translation)
        pharaoh.append(links)
        for pair in filter(None, links.split(" ")):
            i, j = map(int, pair.split("-"))
            assert 0 <= i < len(source.split()) and 0 <= j < len(translation.split())
    assert outputs[1] == "" and pharaoh[1] == ""
    expected = load_aligner(model_dir=str(tiny_run), layer=1).align(SOURCES, outputs)
    assert pharaoh == [alignment.pharaoh() for alignment in expected]
    assert any(pharaoh)


def test_alignments_need_one_best(tiny_run, capsys, monkeypatch):
    status, _, err = run(["--model-dir", str(tiny_run), "--n-best", "2", "--alignments"],
                         capsys, monkeypatch)
    assert status == 2 and "--n-best 1" in err
