"""`cli.flags.search_settings`: the one DecodingConfig a command searches with — the
model's or run's settings with the flags the user gave — built once, n_best checked
against it, and handed to the library as it is."""
import argparse

import pytest

from transformer_tf.cli import flags, translate
from transformer_tf.config import (
    ConfigError,
    DecodingConfig,
    ModelConfig,
    TrainingConfig,
)
from transformer_tf.rundir import model_dir as model_dir_lib

RUN_DECODING = DecodingConfig(beam_size=5, alpha=1.0, max_extra_length=7, chunk_size=8,
                              stopping="k_finished")


def _args(argv):
    parser = argparse.ArgumentParser()
    flags.add_search_flags(parser, "the run's", length=True, stopping=True)
    return parser.parse_args(argv)


def test_flags_given_replace_their_fields_and_the_rest_is_the_base():
    decoding = flags.search_settings(_args(["--beam-size", "2", "--stopping", "exact"]),
                                     RUN_DECODING)
    assert decoding == DecodingConfig(beam_size=2, alpha=1.0, max_extra_length=7,
                                      chunk_size=8, stopping="exact")


def test_no_flag_given_is_the_base_itself():
    assert flags.search_settings(_args([]), RUN_DECODING) is RUN_DECODING


def test_fields_a_command_has_no_flag_for_keep_the_base():
    # export_ctranslate2 defines only --beam-size and --alpha: the others are not "given".
    decoding = flags.search_settings(argparse.Namespace(beam_size=3), RUN_DECODING)
    assert decoding == RUN_DECODING.replace(beam_size=3)


@pytest.mark.parametrize("n_best, beam, fits", [(1, 1, True), (4, 4, True), (5, 4, False),
                                                (2, 1, False)])
def test_n_best_is_checked_against_the_beam_the_settings_end_with(n_best, beam, fits):
    args = _args(["--beam-size", str(beam)])
    if fits:
        assert flags.search_settings(args, RUN_DECODING, n_best=n_best).beam_size == beam
    else:
        with pytest.raises(ConfigError, match=rf"--n-best {n_best}: .* beam size {beam} "):
            flags.search_settings(args, RUN_DECODING, n_best=n_best)


def test_the_rule_itself_lives_in_the_decoding_config():
    DecodingConfig(beam_size=3).check_n_best(3)
    for bad in (0, 4, 2.0, True):
        with pytest.raises(ConfigError, match="n_best"):
            DecodingConfig(beam_size=3).check_n_best(bad)


def test_translate_refuses_more_hypotheses_than_the_beam_before_loading_a_model(
        tmp_path, capsys):
    # A run directory with only its run config: the check comes before any checkpoint or
    # tokenizer is read (neither exists here).
    model_dir_lib.write_run_config(tmp_path, model_dir_lib.RunConfig(
        model=ModelConfig(vocab_size=16), training=TrainingConfig(),
        decoding=RUN_DECODING, data_dir="unused", preset="tiny"))
    status = translate.main(["--model-dir", str(tmp_path), "--n-best", "6", "--quiet"])
    err = capsys.readouterr().err
    assert status == 2
    assert "error: --n-best 6: a search of beam size 5 keeps at most 5" in err
    status = translate.main(["--model-dir", str(tmp_path), "--n-best", "3", "--beam-size", "2",
                             "--quiet"])
    assert status == 2 and "--n-best 3" in capsys.readouterr().err
