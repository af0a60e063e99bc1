"""Ensembles (`models.ensemble.Ensemble`): the searches over the mean of the members'
log-probabilities, checked against brute force over every output of tiny models; an
ensemble of one against its model; the export and the commands (`--ensemble`) against
the in-process ensemble; runs that cannot be decoded together."""
import io
import itertools
import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, DecodingConfig, TrainingConfig
from transformer_tf.presets import get_preset
from transformer_tf.decoding.model_driver import search_model
from transformer_tf.inference.loading import (
    EnsembleMismatchError,
    load_ensemble,
    model_from_saved_model,
)
from transformer_tf.models.ensemble import Ensemble, build_ensemble
from transformer_tf.models.registry import build_model

from .conftest import MAX_POSITION, SERVING_DECODING

VOCAB = 8  # 4 special ids + 4 tokens: the search may emit UNK, EOS and ids 4..7
ALLOWED = [i for i in range(VOCAB) if i not in (PAD_ID, BOS_ID)]
ALPHA = 0.6


def _transformer_config(vocab_size, max_position):
    return get_preset("tiny").model.replace(vocab_size=vocab_size, max_position=max_position,
                                            d_model=16, num_heads=2, d_ff=32, num_layers=1)


def _convs2s_config(vocab_size, max_position):
    return get_preset("convs2s_tiny").model.replace(vocab_size=vocab_size,
                                                    max_position=max_position)


def _sharpened(model, factor=4.0):
    """`model` with its target-side output weights scaled up: a random tiny model's
    distributions are then far from uniform, so the best outputs are well apart."""
    for weight in model.trainable_weights:
        if "embedding" in weight.path or "output" in weight.path:
            weight.assign(weight * factor)
    return model


@pytest.fixture(scope="module")
def toy_members():
    """A Transformer and a ConvS2S model over an 8-id vocabulary, random weights."""
    tf.keras.utils.set_random_seed(21)
    transformer = _sharpened(build_model("transformer", _transformer_config(VOCAB, 16)))
    tf.keras.utils.set_random_seed(22)
    convs2s = _sharpened(build_model("convs2s", _convs2s_config(VOCAB, 16)))
    return transformer, convs2s


# Two sources of different lengths; with max_extra_length 1, outputs of at most 3 and 4.
TOY_SOURCES = [[4, EOS_ID, PAD_ID], [5, 6, EOS_ID]]
TOY_MAX_LENGTHS = [3, 4]


def _teacher_forced_log_probs(members, source, outputs):
    """float64 [N, L, V]: for each output (a token list, at most L tokens), log p of every
    token at every position under the members' mean log-probability, renormalised over
    ALLOWED, from one teacher-forced pass of each member (`call`, not the decoder cache)."""
    length = max(len(y) for y in outputs)
    inputs = np.full((len(outputs), length), PAD_ID, np.int32)
    for row, y in enumerate(outputs):
        inputs[row, :len(y)] = [BOS_ID] + list(y[:-1])
    sources = np.tile(np.array([source], np.int32), [len(outputs), 1])
    mean = np.mean([tf.nn.log_softmax(m((sources, inputs)), -1).numpy().astype(np.float64)
                    for m in members], axis=0)
    scores = np.full_like(mean, -np.inf)
    scores[..., ALLOWED] = mean[..., ALLOWED]
    return scores - np.log(np.sum(np.exp(scores), -1, keepdims=True))


def _brute_force(members, source, max_length):
    """Every output a search may give (ALLOWED tokens; ending in EOS, or cut at
    `max_length`), best first by log P / lp(length): [(score, tokens, log P)]."""
    outputs = []
    for n in range(1, max_length + 1):
        for tokens in itertools.product(ALLOWED, repeat=n):
            if EOS_ID not in tokens[:-1] and (tokens[-1] == EOS_ID or n == max_length):
                outputs.append(tokens)
    log_probs = _teacher_forced_log_probs(members, source, outputs)
    scored = []
    for row, y in enumerate(outputs):
        log_p = sum(log_probs[row, t, token] for t, token in enumerate(y))
        scored.append((log_p / ((5 + len(y)) / 6) ** ALPHA, y, log_p))
    return sorted(scored, key=lambda s: -s[0])


def test_beam_search_of_two_members_equals_brute_force_over_the_mean(toy_members):
    ensemble = Ensemble(toy_members)
    n_best = 5
    # 25 live prefixes x 6 tokens: a beam of 150 never drops a hypothesis (exact search).
    result = search_model(ensemble, tf.constant(TOY_SOURCES),
                          DecodingConfig(beam_size=150, alpha=ALPHA, max_extra_length=1),
                          n_best=n_best)
    for row, (source, max_length) in enumerate(zip(TOY_SOURCES, TOY_MAX_LENGTHS)):
        expected = _brute_force(toy_members, source, max_length)
        assert expected[n_best - 1][0] - expected[n_best][0] > 1e-4  # a well-defined top 5
        for rank, (score, tokens, _) in enumerate(expected[:n_best]):
            length = int(result.lengths[row, rank])
            assert tuple(result.ids[row, rank, :length].numpy()) == tokens, (row, rank)
            np.testing.assert_allclose(result.scores[row, rank], score, rtol=1e-5, atol=1e-5)
        # The comparison can tell: each member alone ranks other outputs first.
        for member in toy_members:
            alone = _brute_force([member], source, max_length)[:n_best]
            assert [t for _, t, _ in alone] != [t for _, t, _ in expected[:n_best]]


def test_greedy_search_takes_the_best_token_of_the_mean_at_every_step(toy_members):
    result = search_model(Ensemble(toy_members), tf.constant(TOY_SOURCES),
                          DecodingConfig(beam_size=1, max_extra_length=3), n_best=1)
    for row, source in enumerate(TOY_SOURCES):
        limit = TOY_MAX_LENGTHS[row] + 2  # source length + max_extra_length
        prefix, log_p = [], 0.0
        while not prefix or (prefix[-1] != EOS_ID and len(prefix) < limit):
            step = _teacher_forced_log_probs(toy_members, source,
                                             [prefix + [EOS_ID]])[0, len(prefix)]
            prefix.append(int(np.argmax(step)))
            log_p += step[prefix[-1]]
        length = int(result.lengths[row, 0])
        assert result.ids[row, 0, :length].numpy().tolist() == prefix
        np.testing.assert_allclose(result.scores[row, 0], log_p, rtol=1e-5, atol=1e-5)


# A Transformer's growing cache makes its searches compacting beam searches; ConvS2S'
# fixed-size state runs the plain greedy loop: both paths.
@pytest.mark.parametrize("member, beam_size", [(0, 3), (1, 1)],
                         ids=["transformer-beam", "convs2s-greedy"])
def test_an_ensemble_of_one_is_its_model(toy_members, member, beam_size):
    model = toy_members[member]
    decoding = DecodingConfig(beam_size=beam_size, alpha=ALPHA, max_extra_length=6)
    alone = search_model(model, tf.constant(TOY_SOURCES), decoding, n_best=beam_size)
    ensemble = search_model(Ensemble([model]), tf.constant(TOY_SOURCES), decoding,
                            n_best=beam_size)
    np.testing.assert_array_equal(ensemble.ids.numpy(), alone.ids.numpy())
    np.testing.assert_array_equal(ensemble.lengths.numpy(), alone.lengths.numpy())
    np.testing.assert_allclose(ensemble.scores.numpy(), alone.scores.numpy(), rtol=1e-5)
    assert len(set(alone.lengths.numpy().ravel().tolist())) > 1  # not all at the limit


def test_members_must_share_the_vocabulary(toy_members):
    other = build_model("convs2s", _convs2s_config(VOCAB, 16).replace(
        target_vocab_size=VOCAB + 1))
    with pytest.raises(ValueError, match=r"member 1 \(convs2s\) has target_vocab_size 9, "
                                         r"member 0 \(transformer\) has 8"):
        Ensemble([toy_members[0], other])
    with pytest.raises(ValueError, match="at least one member"):
        Ensemble([])


# ---------------------------------------------------------------- runs, export, commands
def _write_run(directory, family, config, tokenizer_proto, seed, languages=("", "")):
    """A run directory (run_config.json, bpe.model, checkpoints/ckpt-1) of a random model."""
    from transformer_tf.rundir import checkpoints
    from transformer_tf.rundir import model_dir as model_dir_lib
    from transformer_tf.training.fit import build_model_and_optimizer

    directory.mkdir(parents=True)
    training = TrainingConfig()
    model_dir_lib.write_run_config(directory, model_dir_lib.RunConfig(
        model=config, training=training, decoding=SERVING_DECODING, data_dir="unused",
        preset="tiny", family=family, source_language=languages[0],
        target_language=languages[1]))
    proto = directory.parent / f"{directory.name}.bpe.model"
    proto.write_bytes(tokenizer_proto)
    model_dir_lib.write_tokenizer(directory, proto)
    tf.keras.utils.set_random_seed(seed)
    trainer = build_model_and_optimizer(config, training, family=family)
    checkpoints.make_manager(trainer.network, trainer.optimizer, directory,
                             max_to_keep=1).save(checkpoint_number=1)
    return directory


@pytest.fixture(scope="module")
def two_runs(serving_bpe, tmp_path_factory):
    """Run directories of a random Transformer and a random ConvS2S model over one
    tokenizer (`serving_bpe`), English to German."""
    root = tmp_path_factory.mktemp("ensemble_runs")
    vocab = serving_bpe.vocab_size
    return (_write_run(root / "transformer", "transformer",
                       _transformer_config(vocab, MAX_POSITION), serving_bpe.model_proto, 31,
                       ("en", "de")),
            _write_run(root / "convs2s", "convs2s", _convs2s_config(vocab, MAX_POSITION),
                       serving_bpe.model_proto, 32, ("en", "de")))


SENTENCES = ["A man is riding a bicycle.", "", "Two dogs play in the snow near a fence.",
             "A girl."]


def test_the_exported_ensemble_equals_the_in_process_ensemble(two_runs, tmp_path,
                                                              monkeypatch, capsys):
    # Both through the commands: `translate --ensemble` decodes in this process, `export
    # --ensemble` writes the SavedModel. (--chunk-size 0: one search per request, the
    # smallest graph to trace; chunks and lanes search any model alike.)
    from transformer_tf.cli import export, translate

    runs = [str(r) for r in two_runs]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(
        "".join(s + "\n" for s in SENTENCES).encode())))
    assert translate.main(["--ensemble", *runs, "--quiet", "--n-best", "2"]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("checkpoint:") == 2
    rows = [line.split(" ||| ") for line in captured.out.splitlines()]
    assert [int(r[0]) for r in rows] == [0, 0, 1, 1, 2, 2, 3, 3]
    in_process = np.array([r[1] for r in rows]).reshape(-1, 2)
    in_process_scores = np.array([float(r[2]) for r in rows]).reshape(-1, 2)

    out = tmp_path / "ensemble" / "1"
    assert export.main(["--ensemble", *runs, "--out", str(out), "--no-warmup",
                        "--chunk-size", "0"]) == 0
    assert capsys.readouterr().err.count("checkpoint:") == 2
    info = json.loads((out / "assets.extra" / "transformer_tf.json").read_text())
    assert info["family"] == "ensemble" and info["decoding"]["beam_size"] == 2
    assert [m["family"] for m in info["model"]["members"]] == ["transformer", "convs2s"]
    assert [r["model_dir"] for r in info["runs"]] == runs

    loaded = tf.saved_model.load(str(out))
    text = tf.constant(SENTENCES)
    nbest = loaded.signatures["translate_nbest"](text=text)
    assert [[t.decode() for t in row] for row in nbest["translations"].numpy()] \
        == in_process.tolist()
    np.testing.assert_allclose(nbest["scores"], in_process_scores, atol=1e-4)
    best = loaded.signatures["serving_default"](text=text)
    assert [t.decode() for t in best["translation"].numpy()] == in_process[:, 0].tolist()

    # Rebuilt from the SavedModel's record and variables (what `translate --model` does
    # for other search settings): the same members with the same weights.
    rebuilt, _, _ = model_from_saved_model(out)
    model, *_ = load_ensemble(runs)
    inputs = (tf.constant([[5, 6, EOS_ID]]), tf.constant([[BOS_ID, 7, 9]]))
    np.testing.assert_allclose(rebuilt(inputs), model(inputs), rtol=1e-5, atol=1e-6)


def test_an_ensemble_config_round_trips_through_json(toy_members):
    config = Ensemble(toy_members).config.get_config()
    rebuilt = build_ensemble(json.loads(json.dumps(config)))
    assert [m.family for m in rebuilt.members] == ["transformer", "convs2s"]
    assert rebuilt.config == Ensemble(toy_members).config
    assert Ensemble.from_config(rebuilt.get_config()).config == rebuilt.config  # Keras' way


def _copy_run(run, directory, tokenizer=None, **run_fields):
    """A copy of the run directory `run`, with another tokenizer file or run fields."""
    shutil.copytree(run, directory)
    if tokenizer is not None:
        (directory / "bpe.model").write_bytes(tokenizer)
    if run_fields:
        path = directory / "run_config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **run_fields}))
    return directory


@pytest.mark.parametrize("change, message", [
    ({"tokenizer": b"another tokenizer"}, "its tokenizer .* must share one tokenizer"),
    ({"source_language": "fr"}, "its source language is 'fr', .*'s is 'en'"),
])
def test_runs_that_cannot_be_decoded_together_are_named(two_runs, tmp_path, capsys, change,
                                                        message):
    from transformer_tf.cli import export, translate

    odd = _copy_run(two_runs[1], tmp_path / "odd", **change)
    runs = [str(two_runs[0]), str(odd)]
    with pytest.raises(EnsembleMismatchError, match=message) as raised:
        load_ensemble(runs)
    assert str(raised.value).startswith(f"{odd}:")
    assert translate.main(["--ensemble", *runs, "--quiet"]) == 2
    assert export.main(["--ensemble", *runs, "--out", str(tmp_path / "out" / "1")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert errors == [f"error: {raised.value}"] * 2
    assert not (tmp_path / "out").exists()


def test_the_commands_refuse_a_checkpoint_for_an_ensemble(two_runs, capsys):
    from transformer_tf.cli import translate

    with pytest.raises(SystemExit) as exited:
        translate.main(["--ensemble", str(two_runs[0]), "--checkpoint", "x"])
    assert exited.value.code == 2
    assert "--checkpoint" in capsys.readouterr().err


def test_teacher_forcing_gives_the_mean_of_the_members_log_probabilities(toy_members):
    source = tf.constant([TOY_SOURCES[1]])
    target = tf.constant([[BOS_ID, 5, 7]])
    expected = np.mean([tf.nn.log_softmax(m((source, target)), -1) for m in toy_members], 0)
    np.testing.assert_allclose(Ensemble(toy_members)((source, target)), expected, rtol=1e-6)
