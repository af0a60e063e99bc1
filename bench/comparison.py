"""How bench/run_all.py compares ours with a peer: the issue's targets, the ratio of two
figures, fractions of the matmul peak, and the entry fields that follow from them
(`compare`). Pure arithmetic on worker results (dicts); no worker runs here."""
from __future__ import annotations

# Targets of the performance issue (ratios in one run; memory has none).
TARGETS = {"train_vs_torch": 1.2, "decode_vs_ctranslate2": 0.8, "decode_vs_hf": 1.5,
           "decode_beam4_vs_ctranslate2": 1.2,  # issue 16's, above the older 0.8 for all
           "pipeline_vs_training": 20.0, "train_fraction_of_peak": 0.7,
           "serving_vs_ctranslate2_batch64": 1.0,
           "serving_greedy_vs_ctranslate2_batch64": 1.5, "bf16_vs_float32": 1.5,
           "serving_bf16_vs_float32": 1.3}

# CTranslate2's CPU compute types the serving section also times (where
# ctranslate2.get_supported_compute_types("cpu") lists them), each against our export of
# the same arithmetic, or, for the int8 types, named as the gap it is.
CT2_COMPUTE_TYPES = {
    "bfloat16": ("bfloat16", "like with like: bfloat16 products on both sides"),
    "int8": ("float32", ("int8 gap: CTranslate2's int8 weights and products against our "
                         "float32 (we have no int8 export)")),
    "int8_float32": ("float32", ("int8 gap: CTranslate2's int8 weights and products "
                                 "(float32 elsewhere) against our float32")),
    "int8_bfloat16": ("bfloat16", ("int8 gap: CTranslate2's int8 weights and products "
                                   "(bfloat16 elsewhere) against our bfloat16")),
}


def ratio_of(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


def difference(a, b):
    return None if a is None or b is None else a - b


def share_of_peak(gflops, peak):
    if gflops is None or not peak:
        return None
    return gflops / peak


def largest(entry: dict, *keys):
    """The largest of entry[key] for `keys`, ignoring missing and None; None if none."""
    return max([entry[k] for k in keys if entry.get(k) is not None], default=None)


def run_where(result, **fields):
    """The first of a worker's `runs` whose fields equal `fields` (None values match
    anything), or None."""
    wanted = {k: v for k, v in fields.items() if v is not None}
    return next((run for run in (result or {}).get("runs", [])
                 if all(run.get(k) == v for k, v in wanted.items())), None)


def meets(value, target):
    return None if value is None else value >= target


OUR_VARIANTS = ("xla", "unchunked", "chunked_xla", "lanes")


def compare(entry: dict) -> dict:
    """Adds the comparison of ours with the peer to a benchmark entry (in place; returned).

    `entry` holds "ours", "peer" and optionally "ours_<variant>" for OUR_VARIANTS (our
    other variants), in one metric and unit; what else it holds decides what is added
    (a None input gives a None result):

      always                      "ratio" = ours / peer
      "ours_<variant>"            "ratio_<variant>" = ours_<variant> / peer
      "<who>_gflops" (GFLOP/s)    "<who>_fraction_of_peak" = <who>_gflops / peak_gflops,
        and "peak_gflops"           for each <who> present
      "peer_lanes" (the peer in     "ratio_best" = the best of ours and ours_<variant> /
        its own lanes)              the better of peer and peer_lanes
      "ours_k_finished" or          "ratio_same_rule" = the better of them / the better
        "ours_lanes_k_finished"       of peer and peer_lanes: CTranslate2's own stopping
        (and "peer_lanes")            rule (a sentence ends once beam-size hypotheses
                                      have finished, with a length penalty)
      "target_ratio"              "meets_target": ratio_best if present, else the best of
                                    ratio and ratio_<variant>, >= it; with ratio_same_rule
                                    also "meets_target_same_rule"; with the peer's
                                    fraction of peak also
                                    "target_implies_fraction_of_peak" = target_ratio x
                                    the better of peer's and peer_lanes' fractions (what
                                    meeting the target would take of the machine)
      "target_fraction_of_peak"   "meets_peak_target": the better of ours' and ours_xla's
                                    fraction of peak >= it
    """
    entry["ratio"] = ratio_of(entry["ours"], entry["peer"])
    for variant in OUR_VARIANTS:
        if f"ours_{variant}" in entry:
            entry[f"ratio_{variant}"] = ratio_of(entry[f"ours_{variant}"], entry["peer"])
    for key in [k for k in entry if k.endswith("_gflops") and k != "peak_gflops"]:
        entry[key.replace("_gflops", "_fraction_of_peak")] = share_of_peak(
            entry[key], entry.get("peak_gflops"))
    best_ratio = largest(entry, "ratio", *(f"ratio_{v}" for v in OUR_VARIANTS))
    if "peer_lanes" in entry:
        best_ratio = entry["ratio_best"] = ratio_of(
            largest(entry, "ours", *(f"ours_{v}" for v in OUR_VARIANTS)),
            largest(entry, "peer", "peer_lanes"))
    if "ours_k_finished" in entry or "ours_lanes_k_finished" in entry:
        entry["ratio_same_rule"] = ratio_of(
            largest(entry, "ours_k_finished", "ours_lanes_k_finished"),
            largest(entry, "peer", "peer_lanes"))
    if "target_ratio" in entry:
        entry["meets_target"] = meets(best_ratio, entry["target_ratio"])
        better_peer = largest(entry, "peer_fraction_of_peak", "peer_lanes_fraction_of_peak")
        if better_peer is not None:
            entry["target_implies_fraction_of_peak"] = entry["target_ratio"] * better_peer
        if "ratio_same_rule" in entry:
            entry["meets_target_same_rule"] = meets(entry["ratio_same_rule"],
                                                     entry["target_ratio"])
    if "target_fraction_of_peak" in entry:
        entry["meets_peak_target"] = meets(
            largest(entry, "ours_fraction_of_peak", "ours_xla_fraction_of_peak"),
            entry["target_fraction_of_peak"])
    return entry


def value_of(result, key):
    return None if result is None else result.get(key)


def rounded(value, digits=4):
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    return value
