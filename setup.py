"""Install transformer_tf: `pip install -e .` (add `[test]`, `[serving]`, `[ctranslate2]`,
`[viz]`, `[parsing]`, `[bench]` or `[docs]` for the extras; `-c constraints.txt` for the
versions the test suite ran with).

Installs the commands transformer-tf-prepare, -train, -average, -export, -export-ctranslate2, -translate,
-evaluate, -main, -variations, -attention, -parse-job, -parse and -evalb (transformer_tf/cli;
scripts/*.py run the same code).
"""
import ast
import pathlib

from setuptools import find_packages, setup


def package_version() -> str:
    """transformer_tf.__version__, read without importing the package (its dependencies
    are not installed yet): the one place the version is written."""
    module = ast.parse(pathlib.Path(__file__).parent.joinpath("transformer_tf", "__init__.py")
                       .read_text(encoding="utf-8"))
    return next(node.value.value for node in module.body if isinstance(node, ast.Assign)
                and [target.id for target in node.targets] == ["__version__"])


# Ranges: the floor is the oldest release known to work (what a dependency of ours already
# demands, or a security fix), the ceiling the next major release. The versions the test
# suite ran with are pinned in constraints.txt.
CORE = [
    "tensorflow==2.21.*",
    "keras==3.15.*",
    "tensorflow-text==2.21.*",
    "tensorflow-datasets==4.9.*",
    "sacrebleu==2.6.*",
    "sacremoses==0.2.*",  # Moses tokenizer of the paper-style BLEU
    "sentencepiece==0.2.*",
    "tensorboard==2.21.*",
    "numpy>=1.26,<3",  # tensorflow 2.21's own floor
    "regex>=2021.8.3",  # evaluation/tokenization.py; sacremoses' floor (calendar versions)
    "etils[epath]>=1.9.1,<2",  # data/multi30k_tfds.py; tensorflow-datasets 4.9's floor
    "importlib_resources>=6,<8",  # tensorflow-datasets 4.9 needs it to prepare datasets
    "tqdm>=4.66.3,<5",  # the progress bar (inference/batch.py); 4.66.3 fixes CVE-2024-34062
    "filelock>=3.20.3,<5",  # the run directory's lock (rundir/lock.py); security fixes
    "pyyaml>=6,<7",  # YAML configuration files (cli/config_files.py)
]
# The commands and their modules: transformer_tf.cli.COMMANDS (not imported here: setup.py
# must run before the package's dependencies are installed).
COMMANDS = {
    "transformer-tf-prepare": "prepare_data",
    "transformer-tf-train": "train",
    "transformer-tf-average": "average_checkpoints",
    "transformer-tf-export": "export",
    "transformer-tf-export-ctranslate2": "export_ctranslate2",  # needs [ctranslate2]
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
# TF Serving's gRPC client (docs/serving.md); exports write their warm-up records without it.
SERVING = ["tensorflow-serving-api==2.21.*"]
CTRANSLATE2 = ["ctranslate2==4.8.*"]  # transformer-tf-export-ctranslate2
TEST = ["pytest>=8,<10", "pytest-timeout>=2.2,<3", "pytest-xdist>=3.5,<4",
        "hypothesis==6.*",  # tests/export/test_fuzz_variants.py
        "packaging>=22"]  # tests/test_packaging.py reads requirement specifiers
# The CPU build of torch is on https://download.pytorch.org/whl/cpu (Makefile: make bench).
BENCH = ["torch==2.13.0", "transformers==5.23.*"] + CTRANSLATE2
# The user's guide as a site (mkdocs.yml); tests/docs builds it with --strict.
DOCS = ["mkdocs>=1.6,<2", "mkdocs-material>=9.5,<10", "mkdocstrings[python]>=0.26,<2"]
VIZ = ["matplotlib>=3.8,<4"]  # attention figures (scripts/attention.py, TensorBoard images)
# An independent bracket scorer that tests/evaluation/test_evalb.py compares with.
PARSING = ["PYEVALB==0.1.*"]

setup(
    name="transformer_tf",
    version=package_version(),
    description="The Transformer of 'Attention Is All You Need' in TensorFlow 2 / Keras 3",
    python_requires=">=3.11,<3.12",
    packages=find_packages(include=["transformer_tf", "transformer_tf.*"]),
    install_requires=CORE,
    # The tests draw figures, build the docs, check the warm-up records with TF Serving's
    # own protos and run the CTranslate2 export.
    extras_require={"test": TEST + VIZ + DOCS + SERVING + CTRANSLATE2, "bench": BENCH,
                    "serving": SERVING, "ctranslate2": CTRANSLATE2, "viz": VIZ,
                    "parsing": PARSING, "docs": DOCS},
    entry_points={"console_scripts": [
        f"{command} = transformer_tf.cli.launch:{module}" for command, module in COMMANDS.items()]},
)
