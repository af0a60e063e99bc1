"""transformer_tf.evaluation: sacreBLEU, chrF and paper-style tokenized BLEU.

Quick use from Python:

    from transformer_tf.evaluation import corpus_bleu, evaluate
    corpus_bleu(hypotheses, references)          # cased sacreBLEU, a float
    report = evaluate(hypotheses, references, lang="de")
    print(report.format_text()); report.to_dict()["bleu"]

From the shell: `python scripts/evaluate.py --hyp FILE --ref FILE [--json]`.
"""
from transformer_tf.evaluation.scoring import (
    DEFAULT_LANG,
    EvaluationReport,
    Score,
    chrf,
    corpus_bleu,
    evaluate,
    evaluate_files,
    guess_language,
    lowercase_tokenized_bleu,
    multi_bleu,
    paper_tokenized_bleu,
    sacrebleu_bleu,
)
from transformer_tf.evaluation.hypothesis_files import (
    EvaluationInputError,
    LineCountMismatchError,
    read_hypotheses_and_references,
    read_lines,
)
from transformer_tf.evaluation.tokenization import moses_tokenize, paper_tokenize, split_compounds

__all__ = [
    "DEFAULT_LANG",
    "EvaluationInputError",
    "EvaluationReport",
    "LineCountMismatchError",
    "Score",
    "chrf",
    "corpus_bleu",
    "evaluate",
    "evaluate_files",
    "guess_language",
    "lowercase_tokenized_bleu",
    "moses_tokenize",
    "multi_bleu",
    "paper_tokenize",
    "paper_tokenized_bleu",
    "read_hypotheses_and_references",
    "read_lines",
    "sacrebleu_bleu",
    "split_compounds",
]
