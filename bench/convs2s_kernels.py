"""ConvS2S decoding with its weight-normalised kernels prepared once per search (DecoderState
constants, what ConvS2S.init_cache does) vs normalised again at every step (the code before),
same weights, same run; beam 5, exactly 24 output tokens, random weights.

    .venv/bin/python bench/convs2s_kernels.py
"""
import common  # noqa: F401  (puts the repository on sys.path)
import time, numpy as np, tensorflow as tf
from transformer_tf.presets import get_preset
from transformer_tf.models.convs2s import ConvS2S
from transformer_tf.decoding.model_driver import search_with_lengths

class PerStep(ConvS2S):  # the code before: kernels normalised inside every step
    def decode_step(self, ids, step, state):
        fresh = ConvS2S.init_cache(self, state.per_sentence, 1).constants
        return super().decode_step(ids, step, state._replace(constants=fresh))

config = get_preset("convs2s_multi30k").model
fast = ConvS2S(config); fast.build()
slow = PerStep(config); slow.build(); slow.set_weights(fast.get_weights())
rng = np.random.default_rng(0)
for batch in (1, 16):
    src = rng.integers(4, 8000, (batch, 16)).astype(np.int32); src[:, -1] = 3
    src = tf.constant(src)
    fns = {name: tf.function(lambda s, m=m: search_with_lengths(m, s, beam_size=5, alpha=0.6, n_best=1,
            max_lengths=24, cache_length=24, max_decode_length=24, forbidden_ids=(0, 2, 3)))
           for name, m in (("per_search", fast), ("per_step", slow))}
    for f in fns.values(): f(src)
    best = {n: 1e9 for n in fns}
    for _ in range(5):
        for n, f in fns.items():
            t = time.perf_counter(); out = f(src); out.ids.numpy(); best[n] = min(best[n], time.perf_counter() - t)
    same = bool(tf.reduce_all(fns["per_search"](src).ids == fns["per_step"](src).ids))
    print(f"batch {batch} beam 5, 24 tokens: per-step kernels {best['per_step']*1e3:.1f} ms, per-search {best['per_search']*1e3:.1f} ms, ratio {best['per_step']/best['per_search']:.2f}, same ids {same}")
