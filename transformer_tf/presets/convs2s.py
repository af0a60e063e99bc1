"""ConvS2S (Gehring et al. 2017) presets. The WMT shapes are fairseq's `fconv_wmt_en_de` /
`fconv_wmt_en_fr` (15 blocks per stack, embeddings 768, output 512), which the ConvS2S
paper's WMT'14 models use; its training: Nesterov momentum 0.99, learning rate 0.25,
gradient norm clipped at 0.1, beam 5, finished hypotheses ranked by their mean log-probability
per token (the "average" length penalty: fairseq's normalisation, which ConvS2S used)."""
from __future__ import annotations

from transformer_tf.config import ConvS2SConfig, DecodingConfig, TrainingConfig
from transformer_tf.presets.base import Preset

PAPER_TRAINING = TrainingConfig(optimizer="nesterov", learning_rate=0.25, momentum=0.99,
                                clip_norm=0.1, label_smoothing=0.0, tokens_per_batch=4000,
                                average_last=5)
BEAM_5 = DecodingConfig(beam_size=5, length_penalty="average")
WMT_EN_FR_STACK = (((512, 3),) * 6 + ((768, 3),) * 4 + ((1024, 3),) * 3
                   + ((2048, 1),) + ((4096, 1),))

CONVS2S_PRESETS = {
    "convs2s_tiny": Preset(
        family="convs2s",
        model=ConvS2SConfig(vocab_size=64, embedding_dim=16, encoder_layers=((16, 3),) * 2,
                            decoder_layers=((16, 3), (24, 3)), decoder_output_dim=16,
                            dropout=0.1, max_position=128),
        training=TrainingConfig(optimizer="nesterov", learning_rate=0.25, clip_norm=0.1,
                                tokens_per_batch=512, max_length=64,
                                checkpoint_every_minutes=1.0, keep_checkpoints=5,
                                average_last=2),
        decoding=BEAM_5,
    ),
    # Multi30k on a small CPU: fairseq's IWSLT shape (fconv_iwslt_de_en).
    "convs2s_multi30k": Preset(
        family="convs2s",
        model=ConvS2SConfig(vocab_size=8000, embedding_dim=256,
                            encoder_layers=((256, 3),) * 4, decoder_layers=((256, 3),) * 3,
                            decoder_output_dim=256, dropout=0.2, max_position=256),
        training=PAPER_TRAINING.replace(tokens_per_batch=4096, max_length=128,
                                        label_smoothing=0.1, checkpoint_every_minutes=5.0,
                                        keep_checkpoints=10),
        decoding=BEAM_5,
    ),
    "convs2s_wmt_en_de": Preset(family="convs2s", model=ConvS2SConfig(),
                                training=PAPER_TRAINING, decoding=BEAM_5),
    "convs2s_wmt_en_fr": Preset(
        family="convs2s",
        model=ConvS2SConfig(encoder_layers=WMT_EN_FR_STACK, decoder_layers=WMT_EN_FR_STACK),
        training=PAPER_TRAINING, decoding=BEAM_5),
}
