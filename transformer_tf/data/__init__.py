"""transformer_tf.data: corpora, shared BPE in the graph, tf.data length bucketing.

Typical use:

    from transformer_tf import data
    prepared = data.load_prepared("/path/to/prepared")        # scripts/prepare_data.py
    train = data.make_training_dataset(prepared, "train", tokens_per_batch=4096,
                                       max_length=128, seed=1, repeat=True)
    valid = data.make_evaluation_dataset(prepared, "valid")
    ids = prepared.tokenizer.tokenize(tf.constant(["A dog runs."]))   # RaggedTensor int32

Modules: textio (reading/checking files), corpora (file pairs per split), multi30k,
multi30k_tfds (Multi30k as a TFDS builder; import it to register "multi30k"), wmt (TFDS), bpe (training + in-graph tokenizer), prepare (prepared directories), bucketing
(bucket boundaries and batch sizes), pipeline (tf.data transforms and entry points).
"""
from transformer_tf.data.bpe import BpeOptions, BpeTokenizer, normalize_text, train_bpe
from transformer_tf.data.bucketing import BucketSpec, bucket_batch_sizes, bucket_boundaries
from transformer_tf.data.corpora import SPLITS, ParallelCorpus, ParallelFiles, text_file_corpus
from transformer_tf.data.multi30k import multi30k_corpus
from transformer_tf.data.pipeline import (
    DropCounter,
    add_special_tokens,
    bucket_by_length,
    filter_by_length,
    make_evaluation_dataset,
    make_training_dataset,
    text_pairs,
    to_model_inputs,
    tokenize,
    tokenize_and_filter,
)
from transformer_tf.data.prepare import PreparedData, load_prepared, prepare_corpus
from transformer_tf.data.textio import CorpusError, InvalidUtf8Error, LineCountMismatchError
from transformer_tf.data.wmt import tfds_pairs, wmt14_name, write_tfds_corpus

__all__ = [
    "BpeOptions", "BpeTokenizer", "BucketSpec", "CorpusError", "DropCounter",
    "InvalidUtf8Error", "LineCountMismatchError", "ParallelCorpus", "ParallelFiles",
    "PreparedData", "SPLITS", "add_special_tokens", "bucket_batch_sizes", "bucket_boundaries",
    "bucket_by_length", "filter_by_length", "load_prepared", "make_evaluation_dataset",
    "make_training_dataset", "multi30k_corpus", "normalize_text",
    "prepare_corpus", "text_file_corpus", "text_pairs", "tfds_pairs", "to_model_inputs",
    "tokenize", "tokenize_and_filter", "train_bpe", "wmt14_name", "write_tfds_corpus",
]
