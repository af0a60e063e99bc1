"""A run directory's tokenizer is the one its run was trained with, and a new run never
writes its own over prepared data or an export (rundir/model_dir.py)."""
import pytest

from transformer_tf.config import DecodingConfig, ModelConfig, TrainingConfig
from transformer_tf.rundir import model_dir as model_dir_lib


def run_config(tiny_multi30k, tokenizer_sha256=""):
    return model_dir_lib.RunConfig(
        model=ModelConfig(vocab_size=tiny_multi30k.vocab_size, num_layers=1, d_model=8,
                          d_ff=16, num_heads=2, max_position=32),
        training=TrainingConfig(), decoding=DecodingConfig(),
        data_dir=str(tiny_multi30k.directory), preset="tiny",
        tokenizer_sha256=tokenizer_sha256)


def test_a_replaced_tokenizer_is_refused_naming_the_file(tiny_multi30k, tmp_path):
    proto = tiny_multi30k.bpe_model_path.read_bytes()
    model_dir_lib.write_run_config(
        tmp_path, run_config(tiny_multi30k, model_dir_lib.tokenizer_sha256(proto)))
    model_dir_lib.write_tokenizer(tmp_path, tiny_multi30k.bpe_model_path)
    assert model_dir_lib.read_tokenizer_proto(tmp_path) == proto
    # Another prepare into the run directory, or a copy from another run: other pieces,
    # other ids, and translations that read as nonsense without an error.
    (tmp_path / "bpe.model").write_bytes(proto[:-1] + bytes([proto[-1] ^ 1]))
    with pytest.raises(model_dir_lib.TokenizerChangedError,
                       match=rf"{tmp_path / 'bpe.model'}: not the tokenizer this run was "
                             r"trained with .* recorded in run_config.json\)"):
        model_dir_lib.read_tokenizer_proto(tmp_path)


def test_runs_that_recorded_no_tokenizer_still_load(tiny_multi30k, tmp_path):
    model_dir_lib.write_run_config(tmp_path, run_config(tiny_multi30k))
    (tmp_path / "bpe.model").write_bytes(b"whatever an old run holds")
    assert model_dir_lib.read_tokenizer_proto(tmp_path) == b"whatever an old run holds"


@pytest.mark.parametrize("marker, kind", [("prepared.json", "prepared data"),
                                          ("saved_model.pb", "an exported SavedModel")])
def test_a_new_run_is_not_started_over_prepared_data_or_an_export(tiny_multi30k, tmp_path,
                                                                  marker, kind):
    (tmp_path / marker).write_text("{}")
    (tmp_path / "bpe.model").write_bytes(b"the directory's own tokenizer")
    with pytest.raises(model_dir_lib.RunMismatchError,
                       match=rf"{tmp_path} holds {kind} \({marker}\), not a run"):
        model_dir_lib.check_resume_in(tmp_path, run_config(tiny_multi30k))
    assert (tmp_path / "bpe.model").read_bytes() == b"the directory's own tokenizer"
    assert model_dir_lib.check_resume_in(tmp_path / "new", run_config(tiny_multi30k)) is False
