"""Damaged files beside data and exports are named in the error, not met with a
traceback: prepared.json, an export's description, a SavedModel's variables."""
import pytest
import tensorflow as tf

from transformer_tf.data.prepared_reader import load_prepared
from transformer_tf.data.text_lines import CorpusError
from transformer_tf.inference import loading
from transformer_tf.runtime.json_file import JsonFileError, read_json_file


def test_a_truncated_json_file_is_named_with_its_place(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{\n  "a": 1,\n  "b": [1, 2')
    with pytest.raises(JsonFileError, match=rf"{path}: not valid JSON \(.* at line 3, "):
        read_json_file(path)
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(JsonFileError, match=rf"{path}: not valid JSON \(invalid UTF-8 at byte 7\)"):
        read_json_file(path)


def test_truncated_prepared_data_description(tiny_multi30k, tmp_path):
    text = (tiny_multi30k.directory / "prepared.json").read_text()
    for name in ("train.en", "train.de", "bpe.model"):
        (tmp_path / name).write_bytes((tiny_multi30k.directory / name).read_bytes())
    (tmp_path / "prepared.json").write_text(text[: len(text) // 2])
    with pytest.raises(CorpusError, match=rf"{tmp_path / 'prepared.json'}: not valid JSON .*; "
                                          "prepare the data again"):
        load_prepared(tmp_path)


@pytest.mark.parametrize("content", ["", "{\n", "[1, 2]"])
def test_a_broken_export_description(tmp_path, content):
    path = tmp_path / loading.EXTRA_DIR / loading.EXPORT_INFO
    path.parent.mkdir()
    path.write_text(content)
    with pytest.raises(JsonFileError, match=rf"{path}: not"):
        loading.read_export_info(tmp_path)


def test_a_savedmodel_with_truncated_variables(tmp_path):
    module = tf.Module()
    module.weights = tf.Variable(tf.range(50_000, dtype=tf.float32))
    module.read = tf.function(lambda: module.weights[:3], input_signature=[])
    tf.saved_model.save(module, str(tmp_path))
    assert loading.load_saved_model(tmp_path).read().numpy().tolist() == [0.0, 1.0, 2.0]
    data = next((tmp_path / "variables").glob("variables.data-*"))
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(ValueError, match=rf"{tmp_path}: the SavedModel cannot be loaded "
                                         r"\(.*\); export it again"):
        loading.load_saved_model(tmp_path)
