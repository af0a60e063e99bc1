"""EVALB's COLLINS.prm rules, each on hand-worked trees, and agreement with PYEVALB where
its rules coincide with EVALB's."""
import random

import pytest

from transformer_tf.evaluation.evalb import COLLINS, EvalbParams, evalb, score_sentence


@pytest.fixture(scope="module")
def treebank_trees(shared_data_dir):
    """The cleaned trees of 20 files of the WSJ sample (skip without the shared data)."""
    from transformer_tf.data.treebank_reader import clean_trees, read_mrg_file

    files = sorted((shared_data_dir / "ptb_wsj_sample").glob("wsj_01[0-1]?.mrg"))
    if not files:
        pytest.skip(f"the WSJ sample is not under {shared_data_dir}")
    return clean_trees([tree for path in files for tree in read_mrg_file(path)])


def counts(gold, test, params=COLLINS):
    s = score_sentence(gold, test, params)
    return s.status, s.matched, s.gold_brackets, s.test_brackets


def test_labelled_precision_recall_crossing_and_tags():
    gold = "(TOP (S (NP (DT the) (NN cat)) (VP (VBD sat)) (. .)))"
    test = "(TOP (S (NP (DT the)) (VP (NN cat) (VBD sat)) (. .)))"
    s = score_sentence(gold, test)
    # gold S(0,3) NP(0,2) VP(2,3); test S(0,3) NP(0,1) VP(1,3): only S matches
    assert (s.status, s.matched, s.gold_brackets, s.test_brackets) == ("ok", 1, 3, 3)
    assert s.crossing == 1  # test VP(1,3) crosses gold NP(0,2)
    assert (s.words, s.correct_tags) == (3, 3)  # "." is deleted before tags are counted
    report = evalb([gold], [test])
    assert report.all.recall == pytest.approx(100 / 3)
    assert report.all.f1 == pytest.approx(100 / 3)
    assert report.all.complete_match == 0.0


def test_punctuation_is_excluded_from_spans():
    gold = "(TOP (S (NP (NN it)) (, ,) (VP (VBD rained)) (. .)))"
    # NP takes the comma here; without punctuation it spans the same word
    test = "(TOP (S (NP (NN it) (, ,)) (VP (VBD rained)) (. .)))"
    assert counts(gold, test) == ("ok", 3, 3, 3)
    # a bracket over punctuation only spans nothing and is ignored
    test = "(TOP (S (NP (NN it)) (PRN (, ,)) (VP (VBD rained)) (. .)))"
    assert counts(gold, test) == ("ok", 3, 3, 3)
    assert evalb([gold], [test]).all.complete_match == 100.0


def test_advp_equals_prt_and_other_labels_do_not():
    gold = "(TOP (S (VP (VB give) (PRT (RP up)))))"
    assert counts(gold, "(TOP (S (VP (VB give) (ADVP (RP up)))))") == ("ok", 3, 3, 3)
    assert counts(gold, "(TOP (S (VP (VB give) (NP (RP up)))))") == ("ok", 2, 3, 3)
    assert counts(gold, "(TOP (S (VP (VB give) (NP (RP up)))))",
                  EvalbParams(labeled=False)) == ("ok", 3, 3, 3)


def test_top_deleted_function_tags_cut_and_an_unnamed_root_counted():
    gold = "(TOP (S-TPC-1 (NP-SBJ=2 (NN it)) (VP (VBD rained))))"
    assert counts(gold, "(TOP (S (NP (NN it)) (VP (VBD rained))))") == ("ok", 3, 3, 3)
    assert counts(gold, "(S (NP (NN it)) (VP (VBD rained)))") == ("ok", 3, 3, 3)
    # EVALB deletes TOP only: the PTB's unnamed root is a bracket like any other
    assert counts(gold, "( (S (NP (NN it)) (VP (VBD rained))))") == ("ok", 3, 3, 4)


def test_unary_chains_and_duplicates_count_each_time():
    gold = "(TOP (S (NP (NP (NN it))) (VP (VBD rained))))"  # NP(0,1) twice
    assert counts(gold, "(TOP (S (NP (NN it)) (VP (VBD rained))))") == ("ok", 3, 4, 3)
    assert counts(gold, "(TOP (S (NP (NP (NP (NN it)))) (VP (VBD rained))))") == (
        "ok", 4, 4, 5)


def test_length_and_word_mismatches_are_errors_left_out_of_the_scores():
    gold = "(TOP (S (NP (NN it)) (VP (VBD rained)) (. .)))"
    good = "(TOP (S (NP (NN it)) (VP (VBD rained)) (. .)))"
    untagged_period = "(TOP (S (NP (NN it)) (VP (VBD rained)) (XX .)))"
    other_word = "(TOP (S (NP (NN it)) (VP (VBD poured)) (. .)))"
    unbalanced = "(TOP (S (NP (NN it)) (VP (VBD rained)) (. .))"
    no_words = "(TOP (. .))"
    report = evalb([gold] * 5, [good, untagged_period, other_word, unbalanced, no_words])
    statuses = [s.status for s in report.sentences]
    assert statuses == ["ok", "error", "error", "error", "skip"]
    assert "length unmatch (2|3)" in report.sentences[1].message
    assert "words unmatch" in report.sentences[2].message
    assert (report.all.error_sentences, report.all.skipped_sentences,
            report.all.valid_sentences) == (3, 1, 1)
    assert (report.all.f1, report.all.gold_brackets) == (100.0, 3)
    assert [line for line, _ in report.errors()] == [2, 3, 4]
    with pytest.raises(ValueError):
        evalb([gold], [])


def test_tagging_accuracy_and_the_length_cutoff():
    gold = "(TOP (S (NP (DT the) (NN cat)) (VP (VBD sat)) (. .)))"  # 4 words with "."
    test = "(TOP (S (NP (XX the) (NN cat)) (VP (XX sat)) (. .)))"
    short_gold = "(TOP (S (NP (NN it)) (VP (VBD rained)) (. .)))"  # 3 words with "."
    short_test = "(TOP (S (NP (NN it)) (VP (XX rained)) (. .)))"
    report = evalb([gold, short_gold], [test, short_test], EvalbParams(cutoff_length=3))
    assert report.all.tagging_accuracy == pytest.approx(100 * 2 / 5)  # 1 of 3 + 1 of 2
    # the cutoff counts the gold words, punctuation included: 4 > 3, 3 <= 3
    assert (report.all.sentences, report.short.sentences) == (2, 1)
    assert report.short.tagging_accuracy == pytest.approx(50.0)
    assert evalb([gold, short_gold], [test, short_test], EvalbParams(cutoff_length=2)
                 ).short.sentences == 0


def _without_punctuation_and_top(tree):
    from transformer_tf.data.treebank_reader import Tree

    def strip(node):
        if node.is_preterminal:
            return None if node.label in COLLINS.delete_labels else node
        children = tuple(c for c in map(strip, node.children) if c is not None)
        return Tree(node.label, children) if children else None

    stripped = strip(tree)
    return stripped.children[0] if len(stripped.children) == 1 else Tree("S", stripped.children)


def _corrupt(tokens, rng):
    from transformer_tf.data.linearise import OPEN, CLOSE
    out = []
    for token in tokens:
        r = rng.random()
        if token[0] in (OPEN, CLOSE) and r < 0.15:
            continue  # drop a bracket
        if token[0] == OPEN and r < 0.25:
            token = OPEN + rng.choice(["NP", "VP", "PP", "S", "SBAR", "ADJP"])
        out.append(token)
    return out


def test_agrees_with_pyevalb_where_its_rules_are_evalbs(treebank_trees):
    """PYEVALB matches (label, span) sets with no deletion, no label equivalence and no
    label cutting, counting duplicates once: on trees without punctuation, without TOP,
    without ADVP/PRT and without duplicate brackets the two must agree exactly."""
    pyevalb_scorer = pytest.importorskip("PYEVALB.scorer")
    from PYEVALB import parser as pyevalb_parser

    from transformer_tf.data.linearise import delinearise, linearise

    rng = random.Random(7)
    compared = 0
    for gold_tree in treebank_trees:
        gold_tree = _without_punctuation_and_top(gold_tree)
        words = gold_tree.words()
        if any("_" in w for w in words):
            continue  # PYEVALB splits word_TAG at "_"
        test_tree, _ = delinearise(_corrupt(linearise(gold_tree, "slot"), rng), words, "slot")
        test_tree = test_tree.children[0] if len(test_tree.children) == 1 else None
        if test_tree is None:
            continue
        gold, test = gold_tree.to_string(), test_tree.to_string()
        brackets = [gold, test]
        if any(("ADVP" in t or "PRT" in t) for t in brackets):
            continue
        ours = score_sentence(gold, test)
        spans_gold = _labelled_spans(gold_tree)
        spans_test = _labelled_spans(test_tree)
        if len(set(spans_gold)) != len(spans_gold) or len(set(spans_test)) != len(spans_test):
            continue
        theirs = pyevalb_scorer.Scorer().score_trees(
            pyevalb_parser.create_from_bracket_string(gold),
            pyevalb_parser.create_from_bracket_string(test))
        assert (ours.matched, ours.gold_brackets, ours.test_brackets, ours.crossing,
                ours.correct_tags) == (theirs.matched_brackets, theirs.gold_brackets,
                                       theirs.test_brackets, theirs.cross_brackets,
                                       theirs.correct_tags), (gold, test)
        compared += 1
    assert compared >= 100


def _labelled_spans(tree):
    spans = []

    def visit(node, start):
        if node.is_preterminal:
            return start + 1
        end = start
        for child in node.children:
            end = visit(child, end)
        spans.append((node.label, start, end))
        return end

    visit(tree, 0)
    return spans


def test_evalb_script(tmp_path, capsys):
    import pathlib
    import runpy

    script = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "evalb.py"
    main = runpy.run_path(str(script))["main"]
    gold, test = tmp_path / "gold", tmp_path / "test"
    gold.write_text("(TOP (S (NP (NN it)) (VP (VBD rained)) (. .)))\n" * 2)
    test.write_text("(TOP (S (NP (NN it)) (VP (VBD rained)) (. .)))\n"
                    "(TOP (S (NP (NN it)) (VP (VBD rained)) (XX .)))\n")
    assert main([str(gold), str(test)]) == 0
    out = capsys.readouterr().out
    assert "F1 100.00" in out and "error line 2: length unmatch (2|3)" in out
    test.write_text("(TOP (S (NP (NN it)) (VP (VBD rained))))\n")
    assert main([str(gold), str(test)]) == 2
    assert "1 test trees" in capsys.readouterr().err


def run_evalb_script(argv, capsys):
    """scripts/evalb.py's main on `argv`: (exit status, stdout, stderr)."""
    import pathlib
    import runpy

    script = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "evalb.py"
    status = runpy.run_path(str(script))["main"]([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return status, out, err


TREE = "(TOP (S (NP (NN it)) (VP (VBD rained)) (. .)))"


def test_evalb_script_names_the_file_and_line_of_invalid_utf8(tmp_path, capsys):
    gold, test = tmp_path / "gold", tmp_path / "test"
    gold.write_text(f"{TREE}\n{TREE}\n")
    test.write_bytes(f"{TREE}\n".encode() + b"(TOP (S (NP (NN caf\xff)) (. .)))\n")
    status, out, err = run_evalb_script([gold, test], capsys)
    assert status == 2 and out == ""
    assert f"error: {test}:2: invalid UTF-8 at byte 19" in err


def test_evalb_script_splits_lines_at_newlines_only(tmp_path, capsys):
    """U+2028 (or U+0085, form feed...) inside a tree is a character, not a line end:
    str.splitlines made two lines of it and a false count mismatch. (Inside a word, it
    is part of the word.)"""
    tree = "(TOP (S (NP (NN i\u2028t)) (VP (VBD rained)) (. .)))"
    gold, test = tmp_path / "gold", tmp_path / "test"
    gold.write_text(f"{tree}\n{TREE}\n", encoding="utf-8")
    test.write_text(f"{tree}\r\n{TREE}", encoding="utf-8")  # CRLF and no final newline
    status, out, err = run_evalb_script([gold, test], capsys)
    assert status == 0, err
    assert "F1 100.00" in out and "error line" not in out


@pytest.mark.parametrize("space", ["\u00a0", "\u2028", "\u3000"])
def test_unicode_spaces_inside_a_word_are_part_of_it(space):
    """EVALB splits at ASCII whitespace only: a word holding NBSP, U+2028 or U+3000 is one
    word (str.split would make a bracket of three elements of it, an error)."""
    tree = f"(TOP (S (NP (NNP New{space}York)) (VP (VBZ sleeps)) (. .)))"
    scored = score_sentence(tree, tree)
    assert scored.status == "ok", scored.message
    # Brackets S, NP, VP (TOP deleted); words: New York, sleeps (the full stop deleted,
    # but counted in the length).
    assert (scored.length, scored.words, scored.gold_brackets, scored.matched) == (3, 2, 3, 3)


@pytest.mark.parametrize("empty", ["gold", "test", "both", "against"])
def test_evalb_script_refuses_empty_files(empty, tmp_path, capsys):
    """Two empty files scored F1 0.00 with exit 0; an empty file is refused, named."""
    files = {name: tmp_path / name for name in ("gold", "test", "against")}
    for name, path in files.items():
        path.write_text("" if empty in (name, "both") else f"{TREE}\n")
    if empty == "both":
        files["test"].write_text("")
    status, out, err = run_evalb_script(
        [files["gold"], files["test"], "--against", files["against"]], capsys)
    named = files["gold" if empty == "both" else empty]
    assert status == 2 and out == ""
    assert f"error: {named} is empty: nothing to score" in err
