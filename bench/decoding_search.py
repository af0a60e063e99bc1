"""Overhead of the search itself (not the model): greedy and beam search around a cheap step.

The step is an embedding lookup, a cache write at `step` (a [B', L, d] tensor, like one
layer's self-attention keys) and a projection to the vocabulary. The baseline is a
fixed-length `tf.while_loop` calling the same step on B' = batch * beam rows without any
search, so `overhead` = search time / baseline time at equal step count.

    python bench/decoding_search.py [--batch 16 --vocab 8000 --length 40 --beam 4] [--json]
"""
from __future__ import annotations

import argparse
import json
import time

import tensorflow as tf

from transformer_tf.decoding.beam_and_greedy import beam_search, greedy_search


def make_step(vocab, dim, length, seed=0):
    rng = tf.random.Generator.from_seed(seed)
    embedding = rng.normal([vocab, dim])
    projection = rng.normal([dim, vocab]) / dim ** 0.5

    def step(ids, step, cache):
        x = tf.gather(embedding, ids)  # [B', d]
        keys = tf.where(tf.range(length)[None, :, None] == step, x[:, None, :], cache["keys"])
        context = tf.reduce_mean(keys, axis=1)  # [B', d]
        return tf.matmul(x + context, projection), {"keys": keys}

    return step


def timed(fn, *args, repeats=3):
    fn(*args)  # trace / compile
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args)
        tf.nest.map_structure(lambda t: t.numpy(), out)
        best = min(best, time.perf_counter() - start)
    return best, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--length", type=int, default=40)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    b, k, length = args.batch, args.beam, args.length
    step = make_step(args.vocab, args.dim, length)
    max_lengths = tf.fill([b], length)
    results = {}
    for jit in (False, True):
        def baseline(rows):
            def body(i, ids, cache):
                logits, cache = step(ids, i, cache)
                return i + 1, tf.argmax(logits, -1, output_type=tf.int32), cache

            cache = {"keys": tf.zeros([rows, length, args.dim])}
            return tf.while_loop(lambda i, *_: i < length, body,
                                 (0, tf.fill([rows], 2), cache))[1]

        # eos_id=-1: no hypothesis ever ends early, so every search runs `length` steps.
        def greedy():
            cache = {"keys": tf.zeros([b, length, args.dim])}
            return greedy_search(step, cache, b, max_lengths, eos_id=-1, max_decode_length=length)

        def beam():
            cache = {"keys": tf.zeros([b, length, args.dim])}
            return beam_search(step, cache, b, k, max_lengths, eos_id=-1,
                               max_decode_length=length)

        tag = "xla" if jit else "graph"
        t_base1, _ = timed(tf.function(lambda: baseline(b), jit_compile=jit))
        t_basek, _ = timed(tf.function(lambda: baseline(b * k), jit_compile=jit))
        t_greedy, g = timed(tf.function(greedy, jit_compile=jit))
        t_beam, r = timed(tf.function(beam, jit_compile=jit))
        assert int(g.num_steps) == int(r.num_steps) == length
        results[tag] = {
            "greedy_s": t_greedy, "greedy_overhead": t_greedy / t_base1,
            f"beam{k}_s": t_beam, f"beam{k}_overhead": t_beam / t_basek,
            "greedy_tokens_per_s": b * length / t_greedy,
            f"beam{k}_tokens_per_s": b * length / t_beam,
        }
    report = {"shape": vars(args), "results": results}
    if args.json:
        print(json.dumps(report))
    else:
        for tag, row in results.items():
            print(tag, " ".join(f"{key}={value:.3f}" for key, value in row.items()))


if __name__ == "__main__":
    main()
