"""The paper-scale presets' training cost, on paper: FLOPs per step and per step plan as the
benchmarks count them (bench/model_flops.py), and the time that implies on 8 GPUs.

    .venv/bin/python bench/paper_cost.py [--utilisation 0.49] [--length 27]

A step is the paper's batch: about 25,000 target tokens (and as many source tokens: the
per-target-token figure counts the encoder at source length = target length). The time on
8 GPUs is FLOPs / (8 x peak x utilisation), with each GPU's dense peak from its data sheet
for fp32 and for 16-bit tensor cores (mixed precision), and the utilisation a fraction of
peak the user states: by default the 49 % of the fp32 matmul peak our base-shape training
step reached on a CPU in results/raw/bench-full-2026-11-21.json (XLA); GPUs differ, so this is
an assumption to replace with your own measurement. Also prints the paper's Table 2 cost
column, which is training days x GPUs x 9.5 TFLOPS (a P100's rate), not counted FLOPs.
"""
from __future__ import annotations

import argparse
import json

import common
import model_flops

TOKENS_PER_STEP = 25_000
# Dense peak TFLOP/s from the vendors' data sheets (SXM parts; P100 as the paper assumed).
GPUS = {
    "P100": {"fp32": 9.5, "16-bit": 18.7},
    "V100": {"fp32": 15.7, "16-bit": 125.0},
    "A100": {"fp32": 19.5, "16-bit": 312.0},
    "H100": {"fp32": 67.0, "16-bit": 989.0},
}
# (preset, vocabulary, step plan, paper's Table 2 training cost in FLOPs)
SETUPS = [("base", 37_000, "En-De", 3.3e18), ("big", 37_000, "En-De", 2.3e19),
          ("base", 32_000, "En-Fr", None), ("big_en_fr", 32_000, "En-Fr", None)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--utilisation", type=float, default=0.49)
    parser.add_argument("--length", type=int, default=27,
                        help="tokens per sentence per side (WMT14 En-De BPE: about 27)")
    args = parser.parse_args(argv)
    common.set_thread_env()
    from transformer_tf.presets import get_preset
    from transformer_tf.models.registry import build_model

    rows = []
    for preset_name, vocab, pair, paper in SETUPS:
        preset = get_preset(preset_name)
        model = build_model(preset.family, preset.model.replace(vocab_size=vocab))
        per_token = model_flops.training_flops_per_target_token(
            model, batch=4, source_length=args.length, target_length=args.length)
        steps = preset.training.train_steps
        total = per_token * TOKENS_PER_STEP * steps
        hours = {f"{gpu} {kind}": total / (8 * peak * 1e12 * args.utilisation) / 3600
                 for gpu, peaks in GPUS.items() for kind, peak in peaks.items()}
        rows.append({"setup": f"{preset_name} {pair}", "parameters": int(model.count_params()),
                     "flops_per_step": per_token * TOKENS_PER_STEP, "steps": steps,
                     "flops_plan": total, "paper_table2_flops": paper, "hours_on_8": hours})
        del model
    print("| setup | params | FLOPs / step | steps | FLOPs, plan | paper Table 2 | "
          + " | ".join(f"h on 8x {k}" for k in rows[0]["hours_on_8"]) + " |")
    print("| --- " * (6 + len(rows[0]["hours_on_8"])) + "|")
    for r in rows:
        paper = "" if r["paper_table2_flops"] is None else f"{r['paper_table2_flops']:.1e}"
        print(f"| {r['setup']} | {r['parameters'] / 1e6:.0f} M | {r['flops_per_step']:.2e} | "
              f"{r['steps']:,} | {r['flops_plan']:.2e} | {paper} | "
              + " | ".join(f"{h:.1f}" for h in r["hours_on_8"].values()) + " |")
    print(json.dumps({"utilisation": args.utilisation, "length": args.length, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
