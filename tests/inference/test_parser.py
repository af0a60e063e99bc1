"""The exported parser's in-graph tree reading against the Python rules, and a parsing
SavedModel end to end on a tiny untrained model."""
import random

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.data.linearise import REPAIR_KINDS, tree_from_output
from transformer_tf.inference.parser import trees_from_outputs

TOKENS = ["(S", "(NP", "(VP", ")S", ")NP", ")VP", "XX", "XX", "XX", "<unk>", "(", ")", "NN"]
WORDS = ["a", "b", ",", ".", "(", "''", "c"]


def test_in_graph_reading_agrees_with_python_on_random_outputs():
    rng = random.Random(3)
    outputs, sentences = [], []
    for _ in range(150):
        outputs.append(" ".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 14))))
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6))))
    outputs += ["(S (NP XX XX )NP (VP XX )VP XX )S"]
    sentences += ["the cat sat ."]
    trees, repairs = trees_from_outputs(tf.constant(outputs), tf.constant(sentences))
    for i, (output, sentence) in enumerate(zip(outputs, sentences)):
        tree, counts = tree_from_output(output, sentence)
        assert trees[i].numpy().decode() == tree, (output, sentence)
        assert repairs[i].numpy().tolist() == [getattr(counts, k) for k in REPAIR_KINDS], (
            output, sentence)
    assert trees[-1].numpy().decode() == (
        "(TOP (S (NP (XX the) (XX cat)) (VP (XX sat)) (. .)))")
    assert np.sum(repairs.numpy()) > 150  # the random outputs did need repairs
