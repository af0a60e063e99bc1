"""Transformer presets: the paper's base and big models (section 6.1, Table 3), and the
sizes that train on a CPU."""
from __future__ import annotations

from transformer_tf.config import ModelConfig, TrainingConfig
from transformer_tf.presets.base import Preset

BASE = ModelConfig(num_layers=6, d_model=512, d_ff=2048, num_heads=8, dropout=0.1)
BIG = BASE.replace(d_model=1024, d_ff=4096, num_heads=16, dropout=0.3)

TRANSFORMER_PRESETS = {
    # For unit tests: a few thousand parameters, fast to build and run.
    "tiny": Preset(
        model=ModelConfig(vocab_size=64, num_layers=2, d_model=16, d_ff=32, num_heads=2,
                          dropout=0.1, max_position=128),
        training=TrainingConfig(warmup_steps=100, tokens_per_batch=512, max_length=64,
                                checkpoint_every_minutes=1.0, keep_checkpoints=5,
                                average_last=2),
    ),
    # Multi30k on a small CPU: ~30k sentences, 8k shared BPE vocabulary. The batch
    # follows the tokens an hour buys. In float32 (an AVX2 CPU, some 3,200 steps of
    # 2,048 tokens an hour) 2,048-token batches: twice the steps of 4,096 at equal target
    # tokens gave +4.7 dev BLEU at 1,000 steps of 4,096 (two seeds) and +1.7 in the
    # 60-minute main job (one seed). In mixed precision (a CPU with native bfloat16: some
    # 9,000 steps of 2,048 tokens an hour) 4,096-token batches: in the main job's hour,
    # dev BLEU +1.02 and +0.02 and dev NLL -0.026 and -0.018 (two seeds).
    # docs/recipe-studies.md has both studies.
    "multi30k": Preset(
        model=ModelConfig(vocab_size=8000, num_layers=3, d_model=256, d_ff=1024,
                          num_heads=4, dropout=0.2, max_position=256),
        training=TrainingConfig(warmup_steps=1000, learning_rate_scale=1.0,
                                tokens_per_batch=2048, max_length=128,
                                checkpoint_every_minutes=5.0, keep_checkpoints=10,
                                average_last=5),
        mixed_precision_training={"tokens_per_batch": 4096},
    ),
    "base": Preset(model=BASE, training=TrainingConfig(average_last=5, train_steps=100_000)),
    "big": Preset(model=BIG, training=TrainingConfig(average_last=20, train_steps=300_000)),
    # The paper's big model for WMT14 En-Fr used P_drop 0.1 instead of 0.3.
    "big_en_fr": Preset(model=BIG.replace(dropout=0.1),
                        training=TrainingConfig(average_last=20, train_steps=300_000)),
}
