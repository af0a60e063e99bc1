"""Which target ids a run's loss scores as one class (`TrainingConfig.word_loss`).

"token": none, every id is its own class. "any": the word pieces of a parsing vocabulary
with `words` leaves, exactly the ids the tree grammar scores as "any word" when it copies
the source in search (`decoding.constraints.CopyBracketGrammar.word_tokens`), so that the
loss trained is the score searched.
"""
from __future__ import annotations

import numpy as np

from transformer_tf.config import TrainingConfig
from transformer_tf.decoding.constraints import CopyBracketGrammar
from transformer_tf.data.tree_grammar import tree_grammar


def pooled_ids(training: TrainingConfig, model_proto: bytes, vocab_size: int,
               where: str = "the data") -> np.ndarray | None:
    """bool [vocab_size], the ids scored as one class, or None for word_loss "token".

    Args:
      training: the run's training config.
      model_proto: the shared subword model's bytes.
      vocab_size: the model's target vocabulary size.
      where: names the data in errors (e.g. its directory).

    Raises:
      ValueError: word_loss "any" with a vocabulary that is not a parsing vocabulary
        with `words` leaves.
    """
    if training.word_loss == "token":
        return None
    try:
        grammar = tree_grammar(model_proto, vocab_size)
    except ValueError as error:
        raise ValueError(f"word_loss 'any' is for parsing data (a vocabulary with tree "
                         f"tokens); {where}: {error}") from None
    if not isinstance(grammar, CopyBracketGrammar):
        raise ValueError(f"word_loss 'any' needs `words` leaves; {where} was prepared with "
                         f"`slot` leaves (the word slot XX is a piece of its vocabulary), "
                         f"whose targets hold no word pieces to pool")
    return grammar.word_tokens.numpy()
