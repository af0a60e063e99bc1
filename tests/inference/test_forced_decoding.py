"""Forced decoding (`inference.forced_decoding`) against two independent computations, for
both model families: the training loss of the same teacher-forced pass (label smoothing 0)
and a softmax over the model's logits written out here; and a beam search's own scores of
its outputs (alpha 0: a finished hypothesis' score is its log-probability)."""
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, DecodingConfig
from transformer_tf.presets import get_preset
from transformer_tf.decoding.model_driver import search_model
from transformer_tf.inference.forced_decoding import forced_scores, teacher_forcing_inputs
from transformer_tf.models.convs2s import ConvS2S
from transformer_tf.models.transformer import Transformer
from transformer_tf.training.losses import token_loss_sums

VOCAB = 40


@pytest.fixture(scope="module", params=["transformer", "convs2s"])
def model(request):
    tf.keras.utils.set_random_seed(3)
    if request.param == "transformer":
        config = get_preset("tiny").model.replace(vocab_size=VOCAB, max_position=32, d_model=16,
                                                  num_heads=2, d_ff=32, num_layers=2)
        built = Transformer(config)
    else:
        built = ConvS2S(get_preset("convs2s_tiny").model.replace(vocab_size=VOCAB,
                                                                 max_position=32))
    built.build()
    return built


def _batch():
    """Sources (tokens + EOS) and targets (tokens + EOS) of different lengths, PAD-padded."""
    rng = np.random.default_rng(0)
    sources, targets = np.zeros((3, 7), np.int32), np.zeros((3, 6), np.int32)
    for row, (s, t) in enumerate([(6, 5), (3, 1), (4, 3)]):
        sources[row, :s] = rng.integers(4, VOCAB, s)
        sources[row, s] = EOS_ID
        targets[row, :t] = rng.integers(4, VOCAB, t)
        targets[row, t] = EOS_ID
    return sources, targets


def test_teacher_forcing_inputs_are_bos_and_the_shifted_target():
    target = np.array([[5, 6, EOS_ID, PAD_ID], [7, EOS_ID, PAD_ID, PAD_ID]])
    np.testing.assert_array_equal(teacher_forcing_inputs(target).numpy(),
                                  [[BOS_ID, 5, 6, PAD_ID], [BOS_ID, 7, PAD_ID, PAD_ID]])


def test_scores_equal_the_training_loss_and_a_written_out_softmax(model):
    sources, targets = _batch()
    scores = forced_scores(model, sources, targets)
    np.testing.assert_array_equal(scores.lengths.numpy(), [6, 2, 4])
    # Independently: the logits of the same pass, fed to the training loss.
    target_inputs = np.zeros_like(targets)
    for row, target in enumerate(targets):
        tokens = list(target[:list(target).index(EOS_ID)])
        target_inputs[row, :len(tokens) + 1] = [BOS_ID] + tokens
    logits = model((tf.constant(sources), tf.constant(target_inputs, tf.int32)),
                   training=False).numpy().astype(np.float64)
    sums = token_loss_sums(targets, logits, label_smoothing=0.0)
    np.testing.assert_allclose(float(sums.nll_sum), -scores.log_prob.numpy().sum(), rtol=1e-5)
    assert float(sums.token_count) == 12
    # And per token, log softmax by hand.
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = np.where(targets != PAD_ID,
                        np.take_along_axis(log_probs, targets[..., None], -1)[..., 0], 0.0)
    np.testing.assert_allclose(scores.token_scores.numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(scores.log_prob.numpy(), expected.sum(1), atol=1e-4)


def test_scores_of_a_row_do_not_depend_on_the_others(model):
    sources, targets = _batch()
    together = forced_scores(model, sources, targets).log_prob.numpy()
    alone = forced_scores(model, sources[1:2, :4], targets[1:2, :2]).log_prob.numpy()
    np.testing.assert_allclose(alone[0], together[1], atol=1e-5)


def test_beam_scores_at_alpha_0_are_the_forced_log_probabilities(model):
    sources, _ = _batch()
    beam = 3
    result = search_model(model, tf.constant(sources),
                          DecodingConfig(beam_size=beam, alpha=0.0, max_extra_length=5),
                          n_best=beam)
    hypotheses = tf.reshape(result.ids, [3 * beam, -1])
    searched = np.repeat(sources, beam, axis=0)
    # The search renormalises without PAD and BOS: score under the same distribution.
    forced = forced_scores(model, searched, hypotheses, forbidden_ids=(PAD_ID, BOS_ID))
    np.testing.assert_array_equal(forced.lengths.numpy(), result.lengths.numpy().ravel())
    np.testing.assert_allclose(forced.log_prob.numpy(), result.scores.numpy().ravel(),
                               atol=1e-4)
    # The model's own distribution gives each forbidden id a share, so a little less.
    full = forced_scores(model, searched, hypotheses).log_prob.numpy()
    assert np.all(full < forced.log_prob.numpy())
