import json

import pytest

from transformer_tf.config import ConfigError, DecodingConfig, ModelConfig, TrainingConfig
from transformer_tf.presets import PRESET_NAMES, get_preset


def test_paper_presets_match_table_3():
    base = get_preset("base").model
    assert (base.num_layers, base.d_model, base.d_ff, base.num_heads) == (6, 512, 2048, 8)
    assert (base.resolved_key_dim, base.resolved_value_dim) == (64, 64)
    assert base.dropout == 0.1 and get_preset("base").training.label_smoothing == 0.1
    big = get_preset("big").model
    assert (big.num_layers, big.d_model, big.d_ff, big.num_heads, big.dropout) == (6, 1024, 4096, 16, 0.3)
    assert big.resolved_key_dim == 64
    training = get_preset("base").training
    assert (training.adam_beta_1, training.adam_beta_2, training.adam_epsilon) == (0.9, 0.98, 1e-9)
    assert training.warmup_steps == 4000
    assert DecodingConfig() == DecodingConfig(beam_size=4, alpha=0.6, max_extra_length=50)


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_presets_round_trip_through_json(name):
    preset = get_preset(name)
    for config in (preset.model, preset.training, preset.decoding):
        again = type(config).from_json(config.to_json())
        assert again == config
        json.loads(config.to_json())


@pytest.mark.parametrize("changes, field, words", [
    (dict(d_model=510, num_heads=8), "num_heads", "not divisible"),
    (dict(dropout=1.5), "dropout", "[0, 1)"),
    (dict(num_layers=0), "num_layers", "positive integer"),
    (dict(position_encoding="rotary"), "position_encoding", "sinusoidal"),
    (dict(embedding_sharing="some"), "embedding_sharing", "all"),
    (dict(norm_position="middle"), "norm_position", "post"),
    (dict(vocab_size=3), "vocab_size", "reserved"),
    (dict(target_vocab_size=100, vocab_size=200), "target_vocab_size", "shared vocabulary"),
])
def test_invalid_model_configs_name_the_field(changes, field, words):
    with pytest.raises(ConfigError) as error:
        ModelConfig(**changes)
    assert str(error.value).startswith(field + ":")
    assert words in str(error.value)


def test_explicit_head_sizes_lift_divisibility_rule():
    config = ModelConfig(d_model=510, num_heads=8, key_dim=64, value_dim=48)
    assert config.resolved_key_dim == 64 and config.resolved_value_dim == 48
    with pytest.raises(ConfigError, match="num_heads"):  # d_v would still be d_model / h
        ModelConfig(d_model=510, num_heads=8, key_dim=64)


def test_value_dim_follows_d_model_not_key_dim():
    # Table 3 row (B) varies d_k alone: d_v stays d_model / h = 64.
    row_b = get_preset("base").model.replace(key_dim=16)
    assert (row_b.resolved_key_dim, row_b.resolved_value_dim) == (16, 64)
    resolved = row_b.resolved()
    assert (resolved.key_dim, resolved.value_dim, resolved.num_decoder_layers,
            resolved.target_vocab_size) == (16, 64, 6, 37000)
    assert resolved.resolved() == resolved


def test_label_smoothing_is_a_training_knob():
    assert "label_smoothing" not in ModelConfig().get_config()
    with pytest.raises(ConfigError, match="label_smoothing"):
        TrainingConfig(label_smoothing=-0.1)


def test_the_learning_rate_shape_is_checked_and_old_configs_keep_the_papers():
    with pytest.raises(ConfigError, match="lr_schedule: expected one of .*'inverse_sqrt'"):
        TrainingConfig(lr_schedule="cosine")
    with pytest.raises(ConfigError, match="^schedule_steps: schedule_steps and cooldown_steps "
                                          "go together"):
        TrainingConfig(lr_schedule="warmup_hold_cooldown", cooldown_steps=10)
    with pytest.raises(ConfigError, match="^lr_schedule: warmup_hold_cooldown needs one clock"):
        TrainingConfig(lr_schedule="warmup_hold_cooldown")
    with pytest.raises(ConfigError, match="^lr_schedule: warmup_hold_cooldown needs one clock"):
        TrainingConfig(lr_schedule="warmup_hold_cooldown", schedule_steps=20, cooldown_steps=4,
                       cooldown_minutes=2.0)
    with pytest.raises(ConfigError, match="^cooldown_minutes: expected a positive number"):
        TrainingConfig(lr_schedule="warmup_hold_cooldown", cooldown_minutes=0.0)
    assert TrainingConfig(lr_schedule="warmup_hold_cooldown", cooldown_minutes=12.0)
    with pytest.raises(ConfigError, match="^cooldown_steps: 30 exceeds schedule_steps 20"):
        TrainingConfig(lr_schedule="warmup_hold_cooldown", schedule_steps=20,
                       cooldown_steps=30)
    saved = TrainingConfig().get_config()  # a run recorded before the shapes existed
    for name in ("lr_schedule", "schedule_steps", "cooldown_steps", "cooldown_minutes"):
        del saved[name]
    assert TrainingConfig.from_config(saved).lr_schedule == "inverse_sqrt"


def test_unknown_fields_and_presets_are_rejected():
    with pytest.raises(ConfigError, match="unknown field"):
        ModelConfig.from_config({"d_modle": 512})
    with pytest.raises(ConfigError, match="unknown preset 'huge'"):
        get_preset("huge")
    with pytest.raises(ConfigError, match="warmup_steps"):
        TrainingConfig(warmup_steps=0)
    with pytest.raises(ConfigError, match="beam_size"):
        DecodingConfig(beam_size=0)
    with pytest.raises(ConfigError, match="stopping.*'exact', 'k_finished'"):
        DecodingConfig(stopping="early")
    # Configs saved before the field existed load with the exact rule.
    saved = DecodingConfig().get_config()
    del saved["stopping"]
    assert DecodingConfig.from_config(saved).stopping == "exact"
    with pytest.raises(ConfigError, match="length_penalty.*'gnmt', 'average'"):
        DecodingConfig(length_penalty="mean")


def test_old_run_configs_rank_by_gnmt_and_convs2s_presets_by_the_average(tmp_path):
    from transformer_tf.rundir.model_dir import (
        RunConfig,
        read_run_config,
        write_run_config,
    )

    preset = get_preset("convs2s_tiny")
    run = RunConfig(model=preset.model, training=preset.training, decoding=preset.decoding,
                    data_dir="data", preset="convs2s_tiny", family="convs2s")
    write_run_config(tmp_path, run)
    assert read_run_config(tmp_path).decoding.length_penalty == "average"
    # A run directory written before the field existed: its JSON has no length_penalty.
    path = tmp_path / "run_config.json"
    text = path.read_text()
    assert '"length_penalty": "average"' in text
    path.write_text(text.replace('"length_penalty": "average",', ""))
    assert read_run_config(tmp_path).decoding.length_penalty == "gnmt"
    rules = {name: get_preset(name).decoding.length_penalty for name in PRESET_NAMES}
    assert {name for name, rule in rules.items() if rule == "average"} == {
        name for name in PRESET_NAMES if get_preset(name).family == "convs2s"}


def test_paper_presets_carry_their_step_plans_and_the_en_fr_big_model():
    from transformer_tf.presets import get_preset
    assert get_preset("base").training.train_steps == 100_000
    assert get_preset("big").training.train_steps == 300_000
    big, en_fr = get_preset("big"), get_preset("big_en_fr")
    assert en_fr.model == big.model.replace(dropout=0.1) and big.model.dropout == 0.3
    assert en_fr.training == big.training
    assert get_preset("multi30k").training.train_steps is None  # budgets by time instead


def test_parsing_presets_decode_as_section_6_3_says():
    # The paper: 4 layers, d_model 1024; beam 21, alpha 0.3, outputs up to input + 300,
    # nothing forced on the output. `parsing` is the same preset.
    paper = get_preset("parsing_paper")
    assert get_preset("parsing") is paper
    assert (paper.model.num_layers, paper.model.d_model, paper.model.source_cursor) == (
        4, 1024, False)
    assert (paper.decoding.beam_size, paper.decoding.alpha,
            paper.decoding.max_extra_length, paper.decoding.grammar) == (21, 0.3, 300, "none")
    # Beyond the paper: the dev-chosen alpha, the tree grammar and the source cursor.
    engineered = get_preset("parsing_cpu")
    assert engineered.decoding == paper.decoding.replace(alpha=5.0, grammar="tree")
    assert engineered.model.source_cursor
    from transformer_tf.presets.parsing import PRESET_LEAVES

    assert PRESET_LEAVES == {"parsing_paper": "slot", "parsing": "slot", "parsing_cpu": "words"}


def test_each_family_table_names_its_presets_once():
    from transformer_tf.presets.convs2s import CONVS2S_PRESETS
    from transformer_tf.presets.parsing import PARSING_PRESETS
    from transformer_tf.presets.transformer import TRANSFORMER_PRESETS

    tables = [TRANSFORMER_PRESETS, CONVS2S_PRESETS, PARSING_PRESETS]
    assert len(PRESET_NAMES) == sum(map(len, tables))  # no table hides another's name
    assert all(get_preset(name).family == "convs2s" for name in CONVS2S_PRESETS)
    assert all(get_preset(name).decoding.beam_size == 21 for name in PARSING_PRESETS)
