"""What the CTranslate2 export refuses, with the reason; checked without ctranslate2
installed (the conversion tests in test_ctranslate2.py need it)."""
import pytest

from transformer_tf.presets import get_preset
from transformer_tf.export.ctranslate2 import check_convertible


@pytest.mark.parametrize("option,reason", [
    (dict(source_cursor=True), "source_cursor=True"),
    (dict(attention_window=4), "attention_window=4"),
    (dict(key_dim=8, value_dim=16), "key_dim=8 != value_dim=16"),
])
def test_unconvertible_transformers_are_refused_with_the_field(option, reason):
    config = get_preset("tiny").model.replace(**option)
    with pytest.raises(ValueError, match=reason):
        check_convertible("transformer", config)


def test_the_paper_transformer_is_convertible():
    check_convertible("transformer", get_preset("tiny").model)  # raises nothing


def test_precision_is_refused_naming_compute_type_and_quantization(capsys):
    from transformer_tf.cli.export_ctranslate2 import main

    with pytest.raises(SystemExit) as stop:
        main(["--model-dir", "run", "--out", "ct2/1", "--precision", "bfloat16"])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert "--precision: " in err and "compute_type" in err and "--quantization" in err
