"""FLOPs of a model's forward pass, counted from its TensorFlow graph with one rule for
every model family: 2 x the multiply-adds of each MatMul, BatchMatMul, Einsum and Conv2D
(a 1-D convolution is a Conv2D in the graph) at fixed batch and lengths. Element-wise
ops, softmax, normalisation and embedding lookups are not counted. Training = 3 x forward
(the backward pass computes two products per forward product).

    .venv/bin/python bench/model_flops.py --preset multi30k --preset convs2s_multi30k
"""
from __future__ import annotations

import argparse
import json
import math
import re

import common  # noqa: F401  (puts the repository on sys.path)


def _dims(tensor) -> list[int]:
    shape = tensor.shape
    if shape.rank is None or any(d is None for d in shape.as_list()):
        raise ValueError(f"{tensor.name}: shape {shape} is not static")
    return shape.as_list()


def _op_flops(op) -> int:
    """2 x multiply-adds of one graph op (0 for ops that are not products)."""
    if op.type == "MatMul":
        a, b = _dims(op.inputs[0]), _dims(op.inputs[1])
        m = a[1] if op.get_attr("transpose_a") else a[0]
        k = a[0] if op.get_attr("transpose_a") else a[1]
        n = b[0] if op.get_attr("transpose_b") else b[1]
        return 2 * m * k * n
    if op.type in ("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        out = _dims(op.outputs[0])
        a = _dims(op.inputs[0])
        k = a[-2] if op.get_attr("adj_x") else a[-1]
        return 2 * math.prod(out) * k
    if op.type == "Einsum":
        equation = op.get_attr("equation").decode()
        inputs = re.split(r",", equation.split("->")[0])
        sizes = {}
        for letters, tensor in zip(inputs, op.inputs):
            for letter, size in zip(letters.replace("...", ""), _dims(tensor)[-len(letters):]):
                sizes[letter] = size
        return 2 * math.prod(sizes.values()) if len(inputs) == 2 else 0
    if op.type == "Conv2D":
        out = _dims(op.outputs[0])
        kernel = _dims(op.inputs[1])  # (height, width, in, out)
        return 2 * math.prod(out) * kernel[0] * kernel[1] * kernel[2]
    return 0


def graph_flops(graph) -> int:
    """Sum of `_op_flops` over a graph and the bodies of its functions."""
    total = sum(_op_flops(op) for op in graph.get_operations())
    for function in getattr(graph, "_functions", {}).values():
        body = getattr(function, "graph", None)
        if body is not None:
            total += graph_flops(body)
    return total


def forward_flops(model, batch: int, source_length: int, target_length: int) -> int:
    """FLOPs of `model((source, target))` at these static sizes (inference mode)."""
    import tensorflow as tf

    function = tf.function(lambda s, t: model((s, t), training=False))
    concrete = function.get_concrete_function(
        tf.TensorSpec([batch, source_length], tf.int32),
        tf.TensorSpec([batch, target_length], tf.int32))
    return graph_flops(concrete.graph)


def training_flops_per_target_token(model, batch: int = 32, source_length: int = 16,
                                    target_length: int = 16) -> float:
    """3 x forward FLOPs / target tokens, at sentence lengths typical of the data
    (Multi30k: about 16 BPE tokens per side)."""
    return 3.0 * forward_flops(model, batch, source_length, target_length) / (
        batch * target_length)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", action="append", required=True)
    parser.add_argument("--vocab-size", type=int, help="override the presets' vocabulary")
    parser.add_argument("--length", type=int, default=16, help="tokens per side (default 16)")
    args = parser.parse_args(argv)
    common.set_thread_env()
    from transformer_tf.presets import get_preset
    from transformer_tf.models.registry import build_model

    results = {}
    for name in args.preset:
        preset = get_preset(name)
        config = preset.model
        if args.vocab_size:
            config = config.replace(vocab_size=args.vocab_size)
        model = build_model(preset.family, config)
        results[name] = {
            "parameters": int(model.count_params()),
            "training_flops_per_target_token": training_flops_per_target_token(
                model, source_length=args.length, target_length=args.length)}
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
