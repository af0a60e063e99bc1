"""Install transformer_tf: `pip install -e .` (add `[test]`, `[bench]`, `[viz]`, `[parsing]` or
`[docs]` for the extras).

Installs the commands transformer-tf-prepare, -train, -average, -export, -export-ctranslate2, -translate,
-evaluate, -main, -variations, -attention, -parse-job, -parse and -evalb (transformer_tf/cli;
scripts/*.py run the same code).
"""
from setuptools import find_packages, setup

CORE = [
    "tensorflow==2.21.*",
    "keras==3.15.*",
    "tensorflow-text==2.21.*",
    "tensorflow-datasets==4.9.*",
    "sacrebleu==2.6.*",
    "sacremoses==0.2.*",  # Moses tokenizer of the paper-style BLEU
    "sentencepiece==0.2.*",
    "tensorboard==2.21.*",
    "importlib_resources",  # tensorflow-datasets 4.9 needs it to prepare datasets
    "tqdm",
    "pyyaml>=6,<7",  # YAML configuration files (cli/config_files.py)
    "filelock>=3.12,<5",  # the run directory's lock (rundir/lock.py)
    "tensorflow-serving-api==2.21.*",  # the warm-up requests of exports (export/warmup.py)
]
# The commands and their modules: transformer_tf.cli.COMMANDS (not imported here: setup.py
# must run before the package's dependencies are installed).
COMMANDS = {
    "transformer-tf-prepare": "prepare_data",
    "transformer-tf-train": "train",
    "transformer-tf-average": "average_checkpoints",
    "transformer-tf-export": "export",
    "transformer-tf-export-ctranslate2": "export_ctranslate2",  # needs ctranslate2 ([bench])
    "transformer-tf-translate": "translate",
    "transformer-tf-score": "score",
    "transformer-tf-evaluate": "evaluate",
    "transformer-tf-main": "main_job",
    "transformer-tf-variations": "variations",
    "transformer-tf-attention": "attention",  # needs the [viz] extra to draw
    "transformer-tf-parse-job": "parse_job",
    "transformer-tf-parse": "parse",
    "transformer-tf-evalb": "evalb",
}
TEST = ["pytest>=8", "pytest-timeout", "pytest-xdist>=3.5,<4", "numpy",
        "hypothesis==6.*"]  # tests/export/test_fuzz_variants.py
BENCH = ["torch==2.13.0", "ctranslate2==4.8.*", "transformers==5.23.*"]
# The user's guide as a site (mkdocs.yml); tests/docs builds it with --strict.
DOCS = ["mkdocs>=1.6,<2", "mkdocs-material>=9.5,<10", "mkdocstrings[python]>=0.26,<2"]
VIZ = ["matplotlib>=3.8,<4"]  # attention figures (scripts/attention.py, TensorBoard images)
# An independent bracket scorer that tests/evaluation/test_evalb.py compares with.
PARSING = ["PYEVALB==0.1.*"]

setup(
    name="transformer_tf",
    version="0.1.0",
    description="The Transformer of 'Attention Is All You Need' in TensorFlow 2 / Keras 3",
    python_requires=">=3.11,<3.12",
    packages=find_packages(include=["transformer_tf", "transformer_tf.*"]),
    install_requires=CORE,
    # The tests draw figures too.
    extras_require={"test": TEST + VIZ + DOCS, "bench": BENCH, "viz": VIZ,
                    "parsing": PARSING, "docs": DOCS},
    entry_points={"console_scripts": [
        f"{command} = transformer_tf.cli.{module}:main" for command, module in COMMANDS.items()]},
)
