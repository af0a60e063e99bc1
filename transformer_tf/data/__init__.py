"""transformer_tf.data: corpora, shared BPE in the graph, tf.data length bucketing.

This package imports nothing: import the module that defines what you need, so that the
light modules (text_lines, corpora, bucketing, multi30k) stay usable without TensorFlow.

Modules (those marked TF import TensorFlow):

    text_lines      reading and checking line-aligned text files (UTF-8, line counts, gzip)
    corpora         ParallelFiles / ParallelCorpus: file pairs per split
    multi30k        the Multi30k corpus (local copy or checked download)
    multi30k_tfds   TF  Multi30k as a TFDS builder; import it to register "multi30k"
    wmt             TF  WMT14 from TensorFlow Datasets, written out as text files
    bpe             TF  shared sentencepiece BPE: training, in-graph tokenizer
    bucketing       bucket boundaries and per-bucket batch sizes for a token budget
    length_filter   when a training pair is empty or too long (preparation and tf.data)
    prepared_reader TF  the prepared directory on disk: format, PreparedData, load_prepared
    prepared_writer TF  writing a prepared directory (prepare_corpus, prepare_dataset)
    transforms      TF  `dataset -> dataset` transforms for `dataset.apply`
    datasets        TF  the entry points make_training_dataset, make_evaluation_dataset

Typical use:

    from transformer_tf.data.prepared_reader import load_prepared
    from transformer_tf.data.datasets import make_evaluation_dataset, make_training_dataset

    prepared = load_prepared("/path/to/prepared")        # scripts/prepare_data.py
    train = make_training_dataset(prepared, "train", tokens_per_batch=4096,
                                  max_length=128, seed=1, repeat=True)
    valid = make_evaluation_dataset(prepared, "valid")
    ids = prepared.tokenizer.tokenize(tf.constant(["A dog runs."]))   # RaggedTensor int32
"""
