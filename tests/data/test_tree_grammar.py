"""The parsing task's tree grammar built from a treebank vocabulary (`data.tree_grammar`)."""
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.data.tree_grammar import tree_grammar


def test_the_tree_grammar_of_a_treebank_vocabulary_counts_real_words():
    from transformer_tf.data.bpe import BpeOptions, BpeTokenizer, train_bpe
    from transformer_tf.data.linearise import tree_symbols

    known = ["Ms. Haag plays Elianti .", "Pierre Vinken , 61 years old , will join ."]
    # Unseen characters (byte pieces), brackets, a word holding a tree token, one letter.
    sentences = known + ["naïve ☃ snow☃ x ☃x -LRB- 5,000 -RRB- XXL (NP", "a"]
    symbols = tree_symbols(["S", "NP", "VP"], leaves="slot")
    proto = train_bpe(known * 20 + [" ".join(symbols)] * 5, BpeOptions(
        vocab_size=320, user_defined_symbols=tuple("\u2581" + s for s in symbols)))
    tokenizer = BpeTokenizer(proto)
    grammar = tree_grammar(proto, tokenizer.vocab_size)
    ids = tokenizer.tokenize(tf.constant(sentences)).to_tensor()
    np.testing.assert_array_equal(grammar.count_words(ids), [len(s.split()) for s in sentences])
    with pytest.raises(ValueError, match="tree tokens"):
        tree_grammar(train_bpe(known * 20, BpeOptions(vocab_size=300)), 300)
