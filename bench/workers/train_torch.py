"""Worker: the PyTorch peer's training step (torch.nn.Transformer), one shape.

    python bench/workers/train_torch.py --shape base [--batch 32 --source-len 32
        --target-len 32 --warmup 1 --repeats 3]

The peer is built to match ours: `torch.nn.Transformer` (post-norm, ReLU, dropout 0.1,
batch_first) with the same d_model / heads / d_ff / layers, one embedding matrix shared
by source, target and the pre-softmax projection (37k at the base shape), embeddings
scaled by sqrt(d_model) plus sinusoidal positions, a causal target mask and key-padding
masks, label-smoothed (0.1) cross-entropy over non-pad targets, and Adam (0.9, 0.98,
1e-9) with the paper's warm-up schedule. Eager mode, `torch.set_num_threads(2)`.
nn.Transformer adds a final LayerNorm to each stack (a few thousand FLOPs more than ours).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID  # noqa: E402

common.set_thread_env()


def build(torch, shape: common.Shape, max_len: int = 256):
    nn = torch.nn

    class PeerTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            d = shape.d_model
            self.d_model = d
            self.embedding = nn.Embedding(shape.vocab_size, d, padding_idx=PAD_ID)
            nn.init.normal_(self.embedding.weight, std=d ** -0.5)
            position = torch.arange(max_len, dtype=torch.float32)[:, None]
            rates = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(1e4) / d))
            table = torch.zeros(max_len, d)
            table[:, 0::2] = torch.sin(position * rates)
            table[:, 1::2] = torch.cos(position * rates)
            self.register_buffer("positions", table)
            self.dropout = nn.Dropout(0.1)
            self.transformer = nn.Transformer(
                d_model=d, nhead=shape.num_heads, num_encoder_layers=shape.num_layers,
                num_decoder_layers=shape.num_layers, dim_feedforward=shape.d_ff,
                dropout=0.1, batch_first=True)

        def embed(self, ids):
            x = self.embedding(ids) * math.sqrt(self.d_model)
            return self.dropout(x + self.positions[: ids.shape[1]])

        def forward(self, source, target_in):
            t = target_in.shape[1]
            causal = nn.Transformer.generate_square_subsequent_mask(t)
            source_pad = source == PAD_ID
            target_pad = target_in == PAD_ID
            hidden = self.transformer(
                self.embed(source), self.embed(target_in), tgt_mask=causal,
                src_key_padding_mask=source_pad, tgt_key_padding_mask=target_pad,
                memory_key_padding_mask=source_pad, tgt_is_causal=True)
            return hidden @ self.embedding.weight.t()  # tied 37k projection

    return PeerTransformer()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="base", choices=sorted(common.SHAPES))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--source-len", type=int, default=32)
    parser.add_argument("--target-len", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=None)
    args = parser.parse_args(argv)
    shape = common.SHAPES[args.shape]
    result = {"benchmark": "train_step", "engine": "torch.nn.Transformer", "shape": shape.name,
              "batch": args.batch, "source_len": args.source_len, "target_len": args.target_len,
              "load_average_start": common.load_average()}
    # Engine imports here, after argument parsing: --help and bad arguments do not load
    # torch, and the load average above is sampled before it loads.
    import numpy as np
    import torch

    torch.set_num_threads(common.THREADS)
    torch.manual_seed(0)
    result["versions"] = {"torch": torch.__version__}
    result["threads"] = {"torch": torch.get_num_threads()}
    rss_start = common.current_rss_mb()
    model = build(torch, shape)
    model.train()
    result["model_params"] = int(sum(p.numel() for p in model.parameters()))
    d, warmup_steps = shape.d_model, 4000
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: d ** -0.5 * min((i + 1) ** -0.5, (i + 1) * warmup_steps ** -1.5))
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_ID, label_smoothing=0.1)

    rng = np.random.default_rng(0)
    b, s, t = args.batch, args.source_len, args.target_len
    source = torch.from_numpy(common.random_ids(rng, b, s, shape.vocab_size)).long()
    target = common.random_ids(rng, b, t + 1, shape.vocab_size)
    target[:, 0] = BOS_ID
    target[:, -1] = EOS_ID
    target = torch.from_numpy(target).long()
    target_in, labels = target[:, :-1], target[:, 1:]
    rss_built = common.current_rss_mb()
    losses = []

    def step():
        optimizer.zero_grad(set_to_none=True)
        logits = model(source, target_in)
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(float(loss))

    result.update(common.time_training_step(step, args, shape, b, s, t, losses))
    result.update({"rss_start_mb": round(rss_start, 1), "rss_built_mb": round(rss_built, 1)})
    common.emit(result)


if __name__ == "__main__":
    main()
