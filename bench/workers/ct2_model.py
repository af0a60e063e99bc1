"""Worker: CTranslate2 models of the random-weight Transformers bench/workers/decode_tf.py
decodes, for the CTranslate2 decoding peer.

    python bench/workers/ct2_model.py --shapes base,multi30k --out DIR

For each shape, builds the model decode_tf.py builds (`fixed_length.decode_model`, in
float32) and writes it to DIR/<shape> as a float32
CTranslate2 model through our own converter (`transformer_tf.export.ctranslate2.
transformer_spec`), with a made-up vocabulary (`vocabulary(shape)`): both engines then
decode the very same weights, and the peer needs neither torch nor transformers. Prints
one JSON object {"models": {shape: {"dir", "params" (the model's weights, as decode_tf.py
counts them), "vocabulary" (the token strings by id)}}}.

Runs in its own process: TensorFlow is loaded here, not in the process that times
CTranslate2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

common.set_thread_env()

SPECIAL_PIECES = ("<blank>", "<unk>", "<s>", "</s>")  # ids PAD, UNK, BOS, EOS (config.py)


def vocabulary(shape: common.Shape) -> list[str]:
    """Token strings by id: our four special ids, then made-up pieces "t4", "t5", ..."""
    from transformer_tf.config import BOS_ID, EOS_ID, NUM_SPECIAL_IDS, PAD_ID, UNK_ID

    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == tuple(range(NUM_SPECIAL_IDS))
    return list(SPECIAL_PIECES) + [f"t{i}" for i in range(NUM_SPECIAL_IDS, shape.vocab_size)]


def write_model(shape: common.Shape, out_dir: Path) -> dict:
    """decode_tf.py's random-weight model of `shape` as a CTranslate2 model in `out_dir`;
    returns its entry of the printed "models"."""
    import numpy as np
    import tensorflow  # noqa: F401  (before fixed_length.decode_model, as it asks)

    from fixed_length import decode_model
    from transformer_tf.export.ctranslate2 import transformer_spec

    model = decode_model(shape)
    tokens = vocabulary(shape)
    spec = transformer_spec(model, tokens)
    spec.optimize()  # aliases the shared embedding matrices, as our exporter does
    out_dir.mkdir(parents=True, exist_ok=True)
    spec.save(str(out_dir))
    return {"dir": str(out_dir), "params": int(sum(np.prod(v.shape) for v in model.weights)),
            "vocabulary": tokens}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="base", help="comma-separated: base,multi30k,tiny")
    parser.add_argument("--out", required=True, help="a directory; one model per shape in it")
    args = parser.parse_args(argv)
    models = {name: write_model(common.SHAPES[name], Path(args.out) / name)
              for name in common.csv_list(args.shapes)}
    common.emit({"models": models})


if __name__ == "__main__":
    main()
