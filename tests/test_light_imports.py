"""The light parts of the package work without TensorFlow (checked in a fresh interpreter).

`transformer_tf.data.bucketing`, `transformer_tf.evaluation` and `scripts/evaluate.py`
(its --help and the scoring of two small files) must not import TensorFlow, Keras or the
TF add-ons: scoring a file should not pay seconds of TF start-up, and the test process
itself has TF loaded already, so only a fresh interpreter can tell.
"""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("tensorflow", "keras", "tensorflow_text", "tensorflow_datasets", "tf_keras")

# Runs each step in turn and records, per step, the heavy top-level modules loaded so
# far; the last stdout line is one JSON object.
CHILD = textwrap.dedent(
    """
    import contextlib, importlib, io, json, runpy, sys
    from transformer_tf.cli import launch

    launch.end_process = sys.exit  # the script's exit, here an exception to catch
    script, hyp, ref = sys.argv[1:4]
    heavy = set(sys.argv[4].split(","))
    report = {"steps": {}, "outputs": {}}

    def record(step):
        report["steps"][step] = sorted(heavy & {name.split(".")[0] for name in sys.modules})

    def run_script(step, *args):
        sys.argv = [script, *args]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                runpy.run_path(script, run_name="__main__")
                code = 0
            except SystemExit as stop:
                code = stop.code or 0
        report["outputs"][step] = {"exit": code, "stdout": out.getvalue()}
        record(step)

    for module in ("transformer_tf.data.bucketing", "transformer_tf.evaluation"):
        importlib.import_module(module)
        record(f"import {module}")
    run_script("evaluate.py --help", "--help")
    run_script("evaluate.py --json", "--hyp", hyp, "--ref", ref, "--json")
    print(json.dumps(report))
    """
)


def test_light_modules_do_not_import_tensorflow(tmp_path):
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_text("Ein Hund läuft im Park.\nZwei Kinder spielen.\n", encoding="utf-8")
    ref.write_text("Ein Hund rennt im Park.\nZwei Kinder spielen.\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(REPO / "scripts" / "evaluate.py"), str(hyp), str(ref),
         ",".join(HEAVY)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])

    assert list(report["steps"]) == [
        "import transformer_tf.data.bucketing", "import transformer_tf.evaluation",
        "evaluate.py --help", "evaluate.py --json"]
    loaded = {step: modules for step, modules in report["steps"].items() if modules}
    assert not loaded, f"heavy modules imported (by the first step naming them): {loaded}"

    help_run = report["outputs"]["evaluate.py --help"]
    assert help_run["exit"] == 0 and "--hyp" in help_run["stdout"]
    scored = report["outputs"]["evaluate.py --json"]
    assert scored["exit"] == 0
    scores = json.loads(scored["stdout"])
    assert scores["bleu"] > 0 and scores["chrf"] > 0
