"""The output grammar a `DecodingConfig.grammar` names, built for one subword vocabulary.

"tree" (the parsing task): a `decoding.constraints.BracketGrammar` over the vocabulary's
tree tokens (`data.linearise`): the word slot `XX`, and every labelled opening bracket
`(L` whose closing `)L` is in the vocabulary too. The treebank preparation makes each of
them one piece (sentencepiece user-defined symbols "▁XX", "▁(NP", "▁)NP"). Source words are
counted by their first pieces: sentencepiece pieces that start with "▁", word pieces that
do not start with the suffix mark "##" (a word spelt as <unk> is one word too).
"""
from __future__ import annotations

from transformer_tf.config import EOS_ID
from transformer_tf.data.bpe import python_processor
from transformer_tf.data.linearise import CLOSE, OPEN, WORD_SLOT
from transformer_tf.decoding.constraints import BracketGrammar

SENTENCEPIECE_WORD_START = "\u2581"


def _word_starts(processor) -> list[int]:
    suffix = getattr(processor, "suffix_indicator", None)  # word-piece models only
    starts = []
    for piece_id in range(processor.get_piece_size()):
        piece = processor.id_to_piece(piece_id)
        if processor.is_control(piece_id):
            starts.append(0)
        elif suffix is not None:
            starts.append(int(processor.is_unknown(piece_id) or not piece.startswith(suffix)))
        else:
            starts.append(int(piece.startswith(SENTENCEPIECE_WORD_START)))
    return starts


def tree_grammar(model_proto: bytes, vocab_size: int) -> BracketGrammar:
    """The "tree" grammar of a subword model whose vocabulary holds the tree tokens.

    Args:
      model_proto: the shared subword model's bytes (sentencepiece or word-piece).
      vocab_size: the model's target vocabulary size (ids at or above it are ignored).

    Raises:
      ValueError: the vocabulary has no word slot or no bracket pair (not a parsing
        model's vocabulary).
    """
    processor = python_processor(model_proto)
    token_ids: dict[str, int] = {}
    for piece_id in range(min(processor.get_piece_size(), vocab_size)):
        if processor.is_control(piece_id) or processor.is_unknown(piece_id):
            continue
        token = processor.id_to_piece(piece_id).lstrip(SENTENCEPIECE_WORD_START)
        token_ids.setdefault(token, piece_id)
    labels = sorted(t[len(OPEN):] for t in token_ids
                    if t.startswith(OPEN) and len(t) > len(OPEN) and CLOSE + t[len(OPEN):] in token_ids)
    if WORD_SLOT not in token_ids or not labels:
        raise ValueError(
            f"grammar 'tree' needs the tree tokens ({WORD_SLOT!r} and bracket pairs such as "
            f"'(NP' / ')NP') as pieces of the vocabulary; this vocabulary has "
            f"{'no ' + repr(WORD_SLOT) if WORD_SLOT not in token_ids else 'no bracket pair'}: "
            "was it prepared by prepare_treebank?")
    return BracketGrammar(
        vocab_size=vocab_size, slot_id=token_ids[WORD_SLOT],
        open_ids=[token_ids[OPEN + label] for label in labels],
        close_ids=[token_ids[CLOSE + label] for label in labels],
        word_start=_word_starts(processor), eos_id=EOS_ID)


def output_constraint(grammar: str, model_proto: bytes, vocab_size: int):
    """The constraint for `DecodingConfig.grammar` (None for "none")."""
    if grammar == "none":
        return None
    if grammar == "tree":
        return tree_grammar(model_proto, vocab_size)
    raise ValueError(f"unknown output grammar {grammar!r}")
