"""English constituency parsing presets (section 6.3): words -> linearised tree."""
from __future__ import annotations

from transformer_tf.config import DecodingConfig, ModelConfig, TrainingConfig
from transformer_tf.presets.base import Preset
from transformer_tf.presets.transformer import BASE

# Beam 21, alpha 0.3, output up to input + 300 (the paper), under the tree grammar.
PARSING_DECODING = DecodingConfig(beam_size=21, alpha=0.3, max_extra_length=300,
                                  grammar="tree")

# The parsing job's preset when neither its command line nor a --config file names one.
DEFAULT_PARSING_PRESET = "parsing_cpu"

PARSING_PRESETS = {
    # The paper's 4 layers with d_model 1024 on the WSJ (40k sentences).
    "parsing": Preset(
        model=BASE.replace(num_layers=4, d_model=1024, d_ff=4096, num_heads=16,
                           dropout=0.3, max_position=1024),
        training=TrainingConfig(max_length=512, average_last=5),
        decoding=PARSING_DECODING,
    ),
    # For the 3.5k-sentence sample, chosen on its dev set (docs/parsing.md), 45 minutes
    # of training: the source cursor; d_model 128 (better than 256 at equal time, which
    # trains fewer steps); dropout 0.1 (better than 0.2 at equal steps); alpha 5.0 (with
    # the paper's 0.3 the beam preferred outputs with too few brackets).
    "parsing_cpu": Preset(
        model=ModelConfig(vocab_size=4000, num_layers=3, d_model=128, d_ff=512,
                          num_heads=4, dropout=0.1, max_position=640,
                          source_cursor=True),
        training=TrainingConfig(warmup_steps=400, tokens_per_batch=2048, max_length=256,
                                checkpoint_every_minutes=5.0, keep_checkpoints=10,
                                average_last=5),
        decoding=PARSING_DECODING.replace(alpha=5.0),
    ),
}
