"""The user's documents describe the product as it is: no absolute path of one machine,
no tracker numbers, no work diary. History belongs to git and CHANGELOG.md."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "bench" / "README.md", ROOT / "results" / "README.md",
             *sorted((ROOT / "docs").rglob("*.md"))]

RULES = {
    # /work/..., /root/..., /home/..., /tmp/... as a path (not /proc/cpuinfo, not a URL's path)
    "absolute path of a machine": re.compile(r"(?<![\w.:/-])/(?:work|root|home|tmp|Users)/"),
    "tracker number": re.compile(r"\bissues?\s+#?\d+|(?<![\w/&-])#\d+\b", re.IGNORECASE),
    "work-diary phrase": re.compile(
        r"\b(?:on a busier day|busier (?:day|machine)|(?:this|previous|earlier|first|second|"
        r"third|fourth|fifth|another|last) session|I (?:stopped|ran|measured|tried|changed|"
        r"think|found)|we (?:changed|measured|tried|ran|found)|today|yesterday|this morning|"
        r"on this day|this machine|not reproduced here|no longer|anymore)\b",
        re.IGNORECASE),
}


def offences(text: str) -> list[tuple[str, int, str]]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for rule, pattern in RULES.items():
            match = pattern.search(line)
            if match:
                found.append((rule, number, match.group(0)))
    return found


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_document_holds_no_history(path):
    bad = offences(path.read_text(encoding="utf-8"))
    assert not bad, "\n".join(f"{path.relative_to(ROOT)}:{n}: {rule}: {text!r}"
                              for rule, n, text in bad)


@pytest.mark.parametrize("line", [
    "--model-dir /work/clean/runs/x", "python x.py --out /tmp/attention", "see /root/data",
    "as in issue 16", "fixed by #38", "on a busier day 83.7", "the fourth session measured",
    "I stopped the parse job", "this no longer fails",
])
def test_the_rules_catch(line):
    assert offences(line)


@pytest.mark.parametrize("line", [
    "CPU flags from /proc/cpuinfo", "keras-team/keras#20585 (upstream)",
    "[the run directory](architecture.md#the-run-directory)", "runs/multi30k_en_de/model",
    "https://example.org/work/page", "the issue of padding", "Issues are welcome",
])
def test_the_rules_spare(line):
    assert not offences(line)


# One machine's figures in the package's docstrings and comments (the API reference renders
# them): speeds, peaks and core counts belong to bench/ and docs/performance.md, where the
# machine is named beside them.
MACHINE_FIGURE = re.compile(r"GFLOP/s|sentences/s|\b\d+[- ]core\b|\b\d+(?:\.\d+)? ?ms\b")


def test_the_package_quotes_no_machine_figures():
    package = ROOT / "transformer_tf"
    bad = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
           for path in sorted(package.rglob("*.py"))
           for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
           if MACHINE_FIGURE.search(line) and "MACHINE_FIGURE" not in line]
    assert not bad, "\n".join(bad)
