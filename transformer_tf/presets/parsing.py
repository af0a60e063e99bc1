"""English constituency parsing presets (section 6.3): words -> linearised tree.

Two systems, each with its own leaf convention (`data.linearise.LEAVES`, a property of the
prepared data, so `PRESET_LEAVES` names the one the parsing job prepares by default):

- `parsing_paper` (also called `parsing`): the paper's configuration. 4 layers, d_model
  1024, otherwise a Transformer (d_ff 4096 and 16 heads, the big model's ratio to d_model,
  since the paper names only N and d_model), Vinyals et al.'s linearisation (one `XX` per
  word), beam 21, alpha 0.3, outputs up to input + 300, no output grammar, no cursor.
- `parsing_cpu`: beyond the paper, engineered for the 3.5k-sentence WSJ sample on a CPU.
  Three additions, each switchable for an ablation: the words as leaves, copied from the
  input (`--leaves slot` turns it off), the source cursor (`source_cursor=False`) and the
  tree grammar in search (`grammar="none"`).
"""
from __future__ import annotations

from transformer_tf.config import DecodingConfig, ModelConfig, TrainingConfig
from transformer_tf.presets.base import Preset
from transformer_tf.presets.transformer import BASE

# Beam 21, alpha 0.3, output up to input + 300, nothing forced on the output (the paper).
PAPER_DECODING = DecodingConfig(beam_size=21, alpha=0.3, max_extra_length=300)

PARSING_PAPER = Preset(
    model=BASE.replace(num_layers=4, d_model=1024, d_ff=4096, num_heads=16, dropout=0.3,
                       max_position=1024),
    training=TrainingConfig(max_length=512, average_last=5),
    decoding=PAPER_DECODING,
)

# The parsing job's preset when neither its command line nor a --config file names one.
DEFAULT_PARSING_PRESET = "parsing_cpu"

PARSING_PRESETS = {
    "parsing_paper": PARSING_PAPER,
    # The name does what it says: the paper's parser. Run directories trained under this
    # name when it decoded with the tree grammar keep it (their run_config.json records
    # their decoding; resumed training keeps the recorded grammar, training.fit).
    "parsing": PARSING_PAPER,
    # For the 3.5k-sentence sample, chosen on its dev set (docs/parsing.md), 45 minutes
    # of training: the source cursor; d_model 128 (better than 256 at equal time, which
    # trains fewer steps); dropout 0.1 (better than 0.2 at equal steps); alpha 5.0 (with
    # the paper's 0.3 the beam preferred outputs with too few brackets); the tree grammar.
    "parsing_cpu": Preset(
        model=ModelConfig(vocab_size=4000, num_layers=3, d_model=128, d_ff=512,
                          num_heads=4, dropout=0.1, max_position=640,
                          source_cursor=True),
        training=TrainingConfig(warmup_steps=400, tokens_per_batch=2048, max_length=256,
                                checkpoint_every_minutes=5.0, keep_checkpoints=10,
                                average_last=5),
        decoding=PAPER_DECODING.replace(alpha=5.0, grammar="tree"),
    ),
}

# The leaf convention the parsing job prepares the treebank with for each preset.
PRESET_LEAVES = {"parsing_paper": "slot", "parsing": "slot", "parsing_cpu": "words"}
