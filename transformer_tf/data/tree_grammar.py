"""The parsing task's output grammar, built for one subword vocabulary from the generic
bracket automata of `decoding.constraints` (the search knows no task: the translator
passes it the constraint `output_constraint` builds for `DecodingConfig.grammar`).

"tree" (the parsing task): a grammar over the vocabulary's tree tokens (`data.linearise`):
every labelled opening bracket `(L` whose closing `)L` is in the vocabulary too, and the
leaves. The treebank preparation makes each tree token one piece (sentencepiece
user-defined symbols "▁(NP", "▁)NP", "▁XX"). The vocabulary says which leaf convention its
model was trained on (`data.treebank_to_prepared.leaves_of_vocabulary`): with the word slot `XX` among its pieces,
"slot" (`decoding.constraints.BracketGrammar`), without it "words"
(`decoding.constraints.CopyBracketGrammar`: the source pieces copied in order). Words are
counted by their first pieces: sentencepiece pieces that start with "▁", word pieces that
do not start with the suffix mark "##" (a word spelt as <unk> is one word too).
"""
from __future__ import annotations

from transformer_tf.config import EOS_ID, PAD_ID
from transformer_tf.data.bpe import python_processor
from transformer_tf.data.linearise import CLOSE, OPEN, WORD_SLOT
from transformer_tf.data.treebank_to_prepared import WORD_START, tree_token_ids
from transformer_tf.decoding.constraints import BracketGrammar, CopyBracketGrammar


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
            starts.append(int(piece.startswith(WORD_START)))
    return starts


def tree_grammar(model_proto: bytes, vocab_size: int):
    """The "tree" grammar of a subword model whose vocabulary holds the tree tokens:
    a `BracketGrammar` for "slot" leaves, a `CopyBracketGrammar` for "words".

    Args:
      model_proto: the shared subword model's bytes (sentencepiece or word-piece).
      vocab_size: the model's target vocabulary size (ids at or above it are ignored).

    Raises:
      ValueError: the vocabulary has no bracket pair (not a parsing model's vocabulary).
    """
    processor = python_processor(model_proto)
    token_ids = tree_token_ids(processor, vocab_size)
    labels = sorted(t[len(OPEN):] for t in token_ids
                    if t.startswith(OPEN) and len(t) > len(OPEN) and CLOSE + t[len(OPEN):] in token_ids)
    if not labels:
        raise ValueError(
            "grammar 'tree' needs the tree tokens (bracket pairs such as '(NP' / ')NP') as "
            "pieces of the vocabulary; this vocabulary has no bracket pair: was it prepared "
            "by prepare_treebank?")
    brackets = dict(open_ids=[token_ids[OPEN + label] for label in labels],
                    close_ids=[token_ids[CLOSE + label] for label in labels],
                    word_start=_word_starts(processor), eos_id=EOS_ID)
    if WORD_SLOT in token_ids:
        return BracketGrammar(vocab_size=vocab_size, slot_id=token_ids[WORD_SLOT], **brackets)
    return CopyBracketGrammar(vocab_size=vocab_size, pad_id=PAD_ID, **brackets)


def output_constraint(grammar: str, model_proto: bytes, vocab_size: int):
    """The constraint for `DecodingConfig.grammar` (None for "none")."""
    if grammar == "none":
        return None
    if grammar == "tree":
        return tree_grammar(model_proto, vocab_size)
    raise ValueError(f"unknown output grammar {grammar!r}")
