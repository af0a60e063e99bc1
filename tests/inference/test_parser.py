"""The exported parser's in-graph tree reading against the Python rules, and a parsing
SavedModel end to end on a tiny untrained model."""
import random
import re

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.data.linearise import REPAIR_KINDS, tree_from_output
from transformer_tf.inference.parser import trees_from_outputs

TOKENS = ["(S", "(NP", "(VP", ")S", ")NP", ")VP", "XX", "XX", "XX", "<unk>", "(", ")", "NN"]
WORDS = ["a", "b", ",", ".", "(", "''", "c"]


@pytest.mark.parametrize("leaves", ["slot", "words"])
def test_in_graph_reading_agrees_with_python_on_random_outputs(leaves):
    rng = random.Random(3)
    outputs, sentences = [], []
    for _ in range(40):
        outputs.append(" ".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 14))))
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6))))
    # With "words" leaves a leaf's text is not used: any word takes the next input word.
    outputs += ["(S (NP XX XX )NP (VP XX )VP XX )S" if leaves == "slot" else
                "(S (NP The dog )NP (VP sat )VP . )S"]
    sentences += ["the cat sat ."]
    trees, repairs = trees_from_outputs(tf.constant(outputs), tf.constant(sentences), leaves)
    for i, (output, sentence) in enumerate(zip(outputs, sentences)):
        tree, counts = tree_from_output(output, sentence, leaves)
        assert trees[i].numpy().decode() == tree, (output, sentence)
        assert repairs[i].numpy().tolist() == [getattr(counts, k) for k in REPAIR_KINDS], (
            output, sentence)
    assert trees[-1].numpy().decode() == (
        "(TOP (S (NP (XX the) (XX cat)) (VP (XX sat)) (. .)))")
    assert np.sum(repairs.numpy()) > 40  # the random outputs did need repairs


def _tiny_parser(leaves: str, beam_size: int, seed: int):
    """A Parser over a tiny random model whose BPE knows the tree tokens of `leaves`;
    under the tree grammar even its outputs are well-formed trees."""
    from transformer_tf.config import DecodingConfig
    from transformer_tf.presets import get_preset
    from transformer_tf.data.bpe import BpeOptions, BpeTokenizer, train_bpe
    from transformer_tf.data.linearise import tree_symbols
    from transformer_tf.inference.parser import Parser
    from transformer_tf.inference.translator import Translator
    from transformer_tf.models.transformer import Transformer

    symbols = tree_symbols(["S", "NP", "VP"], leaves)
    tree = "( S ( NP XX XX ) )" if leaves == "slot" else "(S (NP the cat )NP )S"
    lines = ["the cat sat on the mat .", tree, "dogs bark loudly"] * 30
    tokenizer = BpeTokenizer(train_bpe(lines, BpeOptions(
        vocab_size=300, user_defined_symbols=tuple("\u2581" + s for s in symbols))))
    tf.keras.utils.set_random_seed(seed)
    config = get_preset("tiny").model.replace(vocab_size=tokenizer.vocab_size,
                                              max_position=64, d_model=16, d_ff=32)
    model = Transformer(config)
    model.build()
    return Parser(Translator(model, tokenizer, DecodingConfig(
        beam_size=beam_size, alpha=0.3, max_extra_length=8, grammar="tree")))


@pytest.fixture(scope="module")
def exported_parser(tmp_path_factory):
    """A SavedModel of a tiny random parsing model ("slot" leaves); greedy search keeps
    the exported graph (and its loading) small."""
    from transformer_tf.export.saved_model import export_parser

    path = tmp_path_factory.mktemp("parser") / "1"
    export_parser(_tiny_parser("slot", beam_size=1, seed=5), path)
    return path


@pytest.mark.slow
def test_saved_model_through_parse_script(exported_parser, monkeypatch, capsys):
    """scripts/parse.py over the SavedModel's serving_default: whatever the (random) model
    says, each tree reads back over exactly the input words (brackets escaped), and the
    exported grammar leaves nothing to repair."""
    import io
    import pathlib
    import runpy

    from transformer_tf.data.treebank_reader import read_trees

    script = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "parse.py"
    main = runpy.run_path(str(script))["main"]
    sentences = ["the cat sat ( on ) the mat .", "", "dogs bark"]
    stdin = io.TextIOWrapper(io.BytesIO("".join(s + "\n" for s in sentences).encode()))
    monkeypatch.setattr("sys.stdin", stdin)
    assert main(["--model", str(exported_parser), "--quiet", "--batch-size", "2"]) == 0
    captured = capsys.readouterr()
    trees = captured.out.split("\n")
    assert len(trees) == 4 and trees[1] == "" and trees[3] == ""
    for sentence, tree in zip(sentences, trees):
        if sentence:
            words = [{"(": "-LRB-", ")": "-RRB-"}.get(w, w) for w in sentence.split()]
            parsed = read_trees(tree)[0]
            assert parsed.label == "TOP" and parsed.words() == words
            tags = dict(zip(parsed.words(), parsed.tags()))
            assert tags.get(".", ".") == "." and tags.get("dogs", "XX") == "XX"
    # Under the grammar no output needed a repair (the random model's own outputs would).
    assert "repairs: 0 in 0 of 3 sentences" in captured.err
    assert main(["--model", str(exported_parser / "missing")]) == 2
    with pytest.raises(SystemExit):  # search settings belong to --model-dir
        main(["--model", str(exported_parser), "--beam-size", "4"])


WINDOW_LINES = ["the cat sat on the mat .", "", "dogs bark", "zebras ( run )"]


@pytest.fixture(scope="module")
def loaded_parser(exported_parser):
    """(`exported_parser` loaded once (inference.parser.ExportedParser, batches of 8),
    the trees of WINDOW_LINES parsed at once)."""
    from transformer_tf.inference.parser import ExportedParser

    parser = ExportedParser(exported_parser, batch_size=8)
    return parser, parser.parse(WINDOW_LINES)[0]


def test_the_parse_script_prints_each_window_before_reading_the_next(
        exported_parser, loaded_parser, stdin_read_by_windows, monkeypatch, capsys):
    """Read a window at a time (--window 2, then one line typed at a terminal), the trees
    are those of the whole input parsed at once, in order, and the repairs are counted
    over every window. (The command's loading of the export is
    test_saved_model_through_parse_script's; here it gets the export loaded once. Both
    cases in one test: each test starts with TensorFlow's kernels cleared, which costs a
    loaded parser seconds on its first call.)"""
    import io
    import sys

    import transformer_tf.inference.parser as parser_module
    from transformer_tf.cli.parse import main

    lines, (loaded, expected) = WINDOW_LINES, loaded_parser
    monkeypatch.setattr(parser_module, "ExportedParser", lambda path, batch_size: (
        loaded if (path, batch_size) == (str(exported_parser), 8) else None))
    argv = ["--model", str(exported_parser), "--batch-size", "8"]
    for window, typed in ((2, False), (1, True)):
        printed = io.StringIO()
        monkeypatch.setattr(sys, "stdout", printed)
        monkeypatch.setattr(sys, "stdin", stdin_read_by_windows(lines, printed, window, typed))
        assert main(argv + ([] if typed else ["--window", str(window), "--quiet"])) == 0
        assert printed.getvalue() == "".join(tree + "\n" for tree in expected)
        err = capsys.readouterr().err
        assert "repairs: 0 in 0 of 4 sentences" in err
        assert ("each line as it is entered" in err) == typed


def test_the_parse_script_names_the_input_line_of_a_truncated_sentence(
        exported_parser, loaded_parser, stdin_read_by_windows, monkeypatch, caplog):
    """From an export, read two lines a window: a sentence longer than the model's 63
    source positions, the input's 4th line (2nd of the 2nd window), is named by its input
    line number, and no other line is."""
    import io
    import sys

    import transformer_tf.inference.parser as parser_module
    from transformer_tf.cli.parse import main

    loaded, _ = loaded_parser
    monkeypatch.setattr(parser_module, "ExportedParser", lambda path, batch_size: loaded)
    long_line = " ".join(["dogs bark loudly"] * 30)
    lines = ["dogs bark", "", "the cat sat .", long_line]
    printed = io.StringIO()
    monkeypatch.setattr(sys, "stdout", printed)
    monkeypatch.setattr(sys, "stdin", stdin_read_by_windows(lines, printed, 2, False))
    assert main(["--model", str(exported_parser), "--window", "2", "--quiet"]) == 0
    assert len(printed.getvalue().splitlines()) == 4
    warnings = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
    assert len(warnings) == 1 and re.search(r"line 4: \d+ BPE tokens, truncated to the "
                                            r"model's 63", warnings[0]), warnings


def test_parser_with_words_as_leaves_copies_the_sentence_into_a_tree():
    """A tiny random model over a vocabulary without the word slot: the Parser reads it
    as "words" leaves, the tree grammar copies the input pieces, so the raw output is the
    sentence with brackets around and the tree needs no repair."""
    from transformer_tf.data.treebank_reader import read_trees

    parser = _tiny_parser("words", beam_size=2, seed=6)
    assert parser.leaves == "words"
    sentences = ["the cat sat on the mat .", "dogs barked ( loudly )", "zebras"]
    out = parser.parse(tf.constant(sentences))
    for i, sentence in enumerate(sentences):
        words = [{"(": "-LRB-", ")": "-RRB-"}.get(w, w) for w in sentence.split()]
        linearised = out["linearised"][i].numpy().decode().split()
        assert [t for t in linearised if t[0] not in "()" or len(t) == 1] == words
        tree = read_trees(out["tree"][i].numpy().decode())[0]
        assert tree.words() == words
        assert out["repairs"][i].numpy().sum() == 0
