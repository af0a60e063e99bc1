"""Treebank reading and cleaning, the file splits, linearisation and its repairs."""
import pytest

from transformer_tf.data.linearise import (
    RepairCounts, delinearise, linearise, tree_from_output, tree_symbols)
from transformer_tf.data.treebank_reader import (
    Tree, TreebankError, clean_tree, read_trees, split_files, strip_function_tags)

MRG = """
( (S
    (NP-SBJ-1 (NNP Ms.) (NNP Haag) )
    (VP (VBZ plays)
      (NP (NNP Elianti) )
      (S (NP-SBJ (-NONE- *-1) ) ))
    (. .) ))
( (S (NP (PRP It)) (VP (VBD rained)) (. .)))
"""


def test_reads_trees_with_the_unnamed_root():
    trees = read_trees(MRG, "x.mrg")
    assert len(trees) == 2
    assert trees[0].label == "" and trees[0].children[0].label == "S"
    assert trees[0].words() == ["Ms.", "Haag", "plays", "Elianti", "*-1", "."]
    assert trees[1].tags() == ["PRP", "VBD", "."]


@pytest.mark.parametrize("text, where", [
    ("( (S (NP (NN a))\n", "x.mrg:1"),  # never closed
    ("(S (NN a)))\n", "x.mrg:1"),  # closes nothing
    ("\n\n(S (NN a b))", "x.mrg:3"),  # two words
    ("\nword (S (NN a))", "x.mrg:2"),  # word outside
])
def test_ill_formed_input_names_file_and_line(text, where):
    with pytest.raises(TreebankError, match=where):
        read_trees(text, "x.mrg")


def test_cleaning_removes_empty_elements_and_function_tags():
    tree = clean_tree(read_trees(MRG)[0])
    # the -NONE- trace goes, and so do the NP-SBJ and S it leaves empty; NP-SBJ-1 -> NP
    assert tree.to_string() == (
        "(TOP (S (NP (NNP Ms.) (NNP Haag)) (VP (VBZ plays) (NP (NNP Elianti))) (. .)))")
    assert clean_tree(read_trees("( (S (-NONE- *T*)))")[0]) is None
    assert [strip_function_tags(x) for x in ("NP-SBJ-1", "NP=2", "PP-LOC-CLR", "-NONE-",
                                             "-LRB-", "ADVP|PRT", "S")] == [
        "NP", "NP", "PP", "-NONE-", "-LRB-", "ADVP", "S"]


def test_sample_split_by_file_and_standard_sections(tmp_path):
    files = [tmp_path / f"wsj_{i:04d}.mrg" for i in range(1, 200)]
    rule, split = split_files(reversed(files))
    assert [len(split[k]) for k in ("train", "valid", "test")] == [169, 15, 15]
    assert (split["train"][-1].name, split["valid"][0].name, split["test"][0].name,
            split["test"][-1].name) == ("wsj_0169.mrg", "wsj_0170.mrg", "wsj_0185.mrg",
                                        "wsj_0199.mrg")
    full = [tmp_path / f"{s:02d}" / f"wsj_{s:02d}{i:02d}.mrg" for s in range(0, 25)
            for i in (0, 1)]
    rule, split = split_files(full)
    assert rule.startswith("standard")
    assert {f.name[4:6] for f in split["train"]} == {f"{s:02d}" for s in range(2, 22)}
    assert [f.name for f in split["valid"]] == ["wsj_2200.mrg", "wsj_2201.mrg"]
    assert [f.name for f in split["test"]] == ["wsj_2300.mrg", "wsj_2301.mrg"]


def test_linearisation_and_its_inverse():
    tree = clean_tree(read_trees(MRG)[0])
    tokens = linearise(tree, leaves="slot")
    assert " ".join(tokens) == "(S (NP XX XX )NP (VP XX (NP XX )NP )VP XX )S"
    back, counts = delinearise(tokens, tree.words(), leaves="slot")
    assert counts.total == 0 and counts.repaired_sentences == 0
    # the same tree, tags replaced by the placeholder except punctuation
    assert back.to_string() == (
        "(TOP (S (NP (XX Ms.) (XX Haag)) (VP (XX plays) (NP (XX Elianti))) (. .)))")
    assert tree_symbols(["VP", "NP"], leaves="slot") == ["(NP", "(VP", ")NP", ")VP", "XX"]


def test_linearisation_with_the_words_as_leaves():
    tree = clean_tree(read_trees(MRG)[0])
    tokens = linearise(tree, leaves="words")
    assert " ".join(tokens) == "(S (NP Ms. Haag )NP (VP plays (NP Elianti )NP )VP . )S"
    back, counts = delinearise(tokens, tree.words(), leaves="words")
    assert counts.total == 0
    assert back.to_string() == (
        "(TOP (S (NP (XX Ms.) (XX Haag)) (VP (XX plays) (NP (XX Elianti))) (. .)))")
    assert tree_symbols(["VP", "NP"], leaves="words") == ["(NP", "(VP", ")NP", ")VP"]
    # A leaf's own text is not used: every token but a labelled bracket takes the next
    # input word (XX, a misspelt word, a bare bracket), and the repairs are the same.
    assert tree_from_output("(S XX Haag ( )NP )S word", "a b c d", leaves="words") == \
        tree_from_output("(S XX XX XX )NP )S XX", "a b c d", leaves="slot")
    with pytest.raises(ValueError, match="leaves"):
        linearise(tree, leaves="tags")


def repaired(text, sentence):
    tree, counts = tree_from_output(text, sentence, leaves="slot")
    kinds = {k: v for k, v in counts.as_dict().items()
             if v and k not in ("total", "repaired_sentences")}
    return tree, kinds


def test_each_repair_rule():
    assert repaired("(S (NP XX )NP XX XX )S", "a b") == (
        "(TOP (S (NP (XX a)) (XX b)))", {"extra_word_slots": 1})
    assert repaired("(S (NP XX )NP )S", "a b c") == (
        "(TOP (S (NP (XX a))) (XX b) (XX c))", {"missing_word_slots": 2})
    assert repaired("(S (NP XX XX", "a b .") == (
        "(TOP (S (NP (XX a) (XX b) (. .))))",
        {"missing_word_slots": 1, "unclosed_brackets": 2})
    assert repaired(")S (S XX )S )NP", "a") == (
        "(TOP (S (XX a)))", {"unmatched_closings": 2})
    assert repaired("(S (NP XX )VP )S", "a") == (
        "(TOP (S (NP (XX a))))", {"relabelled_closings": 1})
    assert repaired("(S (NP (PP )PP )NP XX )S", "a") == (
        "(TOP (S (XX a)))", {"empty_constituents": 2})
    assert repaired("(S XX <unk> ( ) NN )S", "a") == (
        "(TOP (S (XX a)))", {"unknown_tokens": 4})
    # words with brackets are escaped as in the PTB; an empty sentence gives ""
    assert repaired("(S XX XX XX )S", "( a )")[0] == "(TOP (S (XX -LRB-) (XX a) (XX -RRB-)))"
    assert tree_from_output("(S XX )S", "  ", leaves="slot") == ("", RepairCounts())


def test_repair_counts_add_up():
    total = RepairCounts()
    for text, sentence in (("(S XX XX )S", "a b"), ("(S XX )S", "a b"),
                           ("(S XX XX XX )S )S", "a")):
        total.add(tree_from_output(text, sentence, leaves="slot")[1])
    assert (total.missing_word_slots, total.extra_word_slots, total.unmatched_closings) == (
        1, 2, 1)
    assert total.as_dict()["total"] == 4 and total.repaired_sentences == 2


def test_prepared_treebank(tmp_path):
    from transformer_tf.data.bpe import python_processor
    from transformer_tf.data.treebank_to_prepared import gold_path, prepare_treebank

    source = tmp_path / "tb"
    source.mkdir()
    for i in range(1, 5):
        (source / f"wsj_{i:04d}.mrg").write_text(MRG)
    prepared = prepare_treebank(source, tmp_path / "prep", vocab_size=300, leaves="slot")
    assert prepared.metadata["treebank"]["sentences"] == {"train": 4, "valid": 2, "test": 2}
    assert prepared.files("train").source.read_text().splitlines()[:2] == [
        "Ms. Haag plays Elianti .", "It rained ."]
    target = prepared.files("train").target.read_text().splitlines()[0]
    processor = python_processor(prepared.bpe_model_path.read_bytes())
    # every bracket token and word slot is one piece
    assert len(processor.encode(target)) == len(target.split())
    assert gold_path(prepared, "test").read_text().splitlines()[1] == (
        "(TOP (S (NP (PRP It)) (VP (VBD rained)) (. .)))")
    with pytest.raises(TreebankError):
        prepare_treebank(tmp_path / "nothing", tmp_path / "prep2")
    # "words" leaves: the target's pieces between the brackets are the source's own, and
    # each vocabulary tells its leaf convention.
    from transformer_tf.data.treebank_to_prepared import leaves_of_vocabulary

    words = prepare_treebank(source, tmp_path / "prep_words", vocab_size=300, leaves="words")
    assert words.metadata["treebank"]["leaves"] == "words"
    words_processor = python_processor(words.bpe_model_path.read_bytes())
    for source_line, target_line in zip(words.files("train").source.read_text().splitlines(),
                                        words.files("train").target.read_text().splitlines()):
        pieces = words_processor.encode(target_line, out_type=str)
        brackets = [p for p in pieces if p.lstrip("\u2581")[:1] in ("(", ")")]
        assert len(brackets) == sum(t[0] in "()" for t in target_line.split())
        assert [p for p in pieces if p not in brackets] == words_processor.encode(
            source_line, out_type=str)
    assert leaves_of_vocabulary(words.bpe_model_path.read_bytes()) == "words"
    assert leaves_of_vocabulary(prepared.bpe_model_path.read_bytes()) == "slot"
    # A treebank whose words make "XX" a learned piece cannot hold "words" leaves: its
    # models would be read as "slot" ones.
    xx = tmp_path / "xx"
    xx.mkdir()
    for i in range(1, 5):
        (xx / f"wsj_{i:04d}.mrg").write_text(MRG + "( (S (NP (NN XX)) (VP (VBD XX)) (. .)))\n" * 20)
    with pytest.raises(TreebankError, match="learned 'XX'"):
        prepare_treebank(xx, tmp_path / "prep_xx", vocab_size=300, leaves="words")


def test_tree_rejects_nothing_it_can_print():
    leaf = Tree("NN", ("a",))
    assert leaf.is_preterminal and Tree("NP", (leaf,)).to_string() == "(NP (NN a))"
