"""BPE-dropout (`TrainingConfig.bpe_dropout`): sampled segmentations of the same text, the
limit where every merge is dropped (one piece per character, counted by hand), the
training pipeline drawing anew each pass, and the settings that refuse it."""
import collections
import io
import json

import pytest
import sentencepiece as spm
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, ConfigError, TrainingConfig
from transformer_tf.data import bpe, wordpiece
from transformer_tf.data.datasets import make_training_dataset
from transformer_tf.data.transforms import tokenize_and_filter

SENTENCES = ["A little girl climbing into a wooden playhouse.",
             "Zwei junge Männer stehen vor einem großen Gebäude."]


def _pieces(processor, ids) -> str:
    return "".join(processor.id_to_piece(i) for i in ids)


def test_no_dropout_is_the_models_segmentation(small_tokenizer):
    text = tf.constant(SENTENCES)
    assert (small_tokenizer.sample_tokenize(text, 0.0).to_list()
            == small_tokenizer.tokenize(text).to_list())


def test_sampled_segmentations_differ_and_spell_the_same_text(small_bpe_proto,
                                                               small_tokenizer):
    processor = bpe.python_processor(small_bpe_proto)
    text = tf.constant(SENTENCES)
    plain = small_tokenizer.tokenize(text).to_list()
    seen = [set() for _ in SENTENCES]
    lengths = [[] for _ in SENTENCES]
    for _ in range(30):
        sampled = small_tokenizer.sample_tokenize(text, 0.3)
        assert (small_tokenizer.detokenize(sampled).numpy().tolist()
                == small_tokenizer.detokenize(tf.ragged.constant(plain)).numpy().tolist())
        for i, ids in enumerate(sampled.to_list()):
            assert _pieces(processor, ids) == _pieces(processor, plain[i])
            seen[i].add(tuple(ids))
            lengths[i].append(len(ids))
    for i in range(len(SENTENCES)):
        assert len(seen[i]) > 5, "the segmentation should vary from draw to draw"
        # Dropping merges leaves more, smaller pieces on average.
        assert sum(lengths[i]) / len(lengths[i]) > len(plain[i])


def test_dropping_almost_every_merge_leaves_one_piece_per_character(small_tokenizer):
    text = "a dog runs"
    # sentencepiece marks each word start with U+2581: "▁a▁dog▁runs", 11 characters,
    # every one of them a piece of the model.
    characters = len("_a_dog_runs")
    counts = collections.Counter(
        len(small_tokenizer.sample_tokenize(tf.constant([text]), 0.999).to_list()[0])
        for _ in range(20))
    assert counts.most_common(1)[0][0] == characters
    assert max(counts) <= characters
    assert len(small_tokenizer.tokenize(tf.constant([text])).to_list()[0]) < characters


def test_training_batches_draw_anew_each_pass(small_prepared):
    dataset = make_training_dataset(small_prepared, "train", tokens_per_batch=4096,
                                    max_length=64, shuffle=False, repeat=False,
                                    return_dict=True, bpe_dropout=0.2)
    tokenizer = small_prepared.tokenizer
    plain_pass = make_training_dataset(small_prepared, "train", tokens_per_batch=4096,
                                       max_length=64, shuffle=False, repeat=False,
                                       return_dict=True)

    def by_id(data):
        rows = {}
        for batch in data:
            for pair_id, source, labels in zip(batch["id"].numpy(), batch["source"].numpy(),
                                               batch["labels"].numpy()):
                rows[int(pair_id)] = (tuple(int(t) for t in source if t),
                                      tuple(int(t) for t in labels if t))
        return rows

    first, second, plain = by_id(dataset), by_id(dataset), by_id(plain_pass)
    common = sorted(set(first) & set(second) & set(plain))
    assert len(common) > 0.95 * len(plain)  # a few sampled pairs may pass max_length
    assert sum(first[i] != second[i] for i in common) > 0.5 * len(common)

    def text(ids):
        return tokenizer.detokenize(tf.ragged.constant([list(ids)])).numpy()[0]

    for i in common[:50]:
        for rows in (first, second):
            source, labels = rows[i]
            assert source[-1] == EOS_ID and labels[-1] == EOS_ID and BOS_ID not in labels
            assert text(source) == text(plain[i][0])
            assert text(labels) == text(plain[i][1])
    lengths = [sum(len(rows[i][1]) for i in common) for rows in (plain, first)]
    assert lengths[1] > lengths[0]


def _unigram_model(sentences) -> bytes:
    """A sentencepiece unigram model with the project's special ids."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=model,
                                   model_type="unigram", vocab_size=300, pad_id=0, unk_id=1,
                                   bos_id=2, eos_id=3, minloglevel=2)
    return model.getvalue()


def test_word_pieces_and_unigram_models_refuse_it(small_tokenizer, multi30k_dir, gz_lines):
    assert small_tokenizer.model_type == "BPE"
    vocab = ["<pad>", "<unk>", "<s>", "</s>", "a", "##b"]
    model = wordpiece.MAGIC + json.dumps({"vocab": vocab, "suffix_indicator": "##",
                                          "max_bytes_per_word": 12}).encode()
    with pytest.raises(ValueError, match="bpe_dropout.*WordpieceTokenizer"):
        tokenize_and_filter(wordpiece.WordpieceTokenizer(model), 64, bpe_dropout=0.1)
    unigram = bpe.BpeTokenizer(_unigram_model(gz_lines(multi30k_dir / "train.en.gz", 500)))
    assert unigram.model_type == "UNIGRAM"
    assert unigram.sample_tokenize(tf.constant(["a dog"]), 0.0).to_list()
    with pytest.raises(ValueError, match="bpe_dropout.*unigram"):
        unigram.sample_tokenize(tf.constant(["a dog"]), 0.1)


def test_the_setting_is_a_probability_and_old_configs_read_as_off():
    for bad in (-0.1, 1.0, True, "0.1"):
        with pytest.raises(ConfigError, match="bpe_dropout"):
            TrainingConfig(bpe_dropout=bad)
    config = TrainingConfig(bpe_dropout=0.1)
    assert TrainingConfig.from_config(config.get_config()) == config
    old = config.get_config()
    del old["bpe_dropout"]
    assert TrainingConfig.from_config(old).bpe_dropout == 0.0


def test_a_resumed_run_keeps_its_recorded_bpe_dropout(tmp_path):
    from transformer_tf.presets import get_preset
    from transformer_tf.rundir import model_dir as model_dir_lib
    from transformer_tf.training.fit import TrainOptions, _keep_recorded_settings

    preset = get_preset("multi30k")

    def run(dropout):
        return model_dir_lib.RunConfig(model=preset.model,
                                       training=preset.training.replace(bpe_dropout=dropout),
                                       decoding=preset.decoding, data_dir="data",
                                       preset="multi30k")

    def resume(requested, **overrides):
        options = TrainOptions(data_dir="data", model_dir=str(tmp_path), preset="multi30k",
                               training_overrides=overrides)
        return _keep_recorded_settings(requested, options, tmp_path)

    model_dir_lib.write_run_config(tmp_path, run(0.1))
    assert resume(run(0.0)).training.bpe_dropout == 0.1  # the command without the option
    assert resume(run(0.0), bpe_dropout=0.0).training.bpe_dropout == 0.0  # given: it wins
