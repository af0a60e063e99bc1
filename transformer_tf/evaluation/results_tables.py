"""Result tables for the docs, rendered from the committed JSON files in `results/`.

Every figure the README and the docs quote lives in a file `results/<experiment>/<name>.json`
with what was measured, the values and their units, the command, the commit, the machine
and the date (the schema is in `results/README.md`). A document asks for a table with a
pair of marker comments; whatever lies between them is replaced by the rendering:

    <!-- results:summary main_job/avx2-a4eb3fa parsing/wsj-sample-5917a2e -->
    <!-- /results -->

Kinds: `summary FILE...` (one row per file: what, figure, command, machine, date,
commit), `table FILE` (the file's rows, then where they come from), `values FILE` (the
file's named values with their units, then where they come from), `sentences FILE` (the
file's `sentences`, format strings over its values, as one paragraph: a finding stated
in words stays true to the numbers). FILE is a path under `results/` without `.json`.

`render_document(text, results_dir)` returns the document with every marked table
rendered; `check` and `write` apply it to files. No TensorFlow here: this runs in the
docs build and its test.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import re

MARKER = re.compile(
    r"(?P<open><!-- results:(?P<kind>\w+)(?P<args>[^>]*?)\s*-->)\n"
    r"(?P<body>.*?)"
    r"(?P<close><!-- /results -->)", re.DOTALL)

KINDS = ("summary", "table", "values", "sentences")


class ResultsError(ValueError):
    """A marker names a missing file or kind, or a results file lacks a field."""


REQUIRED = ("what", "command", "commit", "commit_role", "machine", "date", "values", "units",
            "headline")


def load(results_dir: pathlib.Path, name: str) -> dict:
    """The results file `results_dir/name.json`, checked for the fields every file has."""
    path = results_dir / f"{name}.json"
    if not path.is_file():
        raise ResultsError(f"no results file {path}")
    data = json.loads(path.read_text(encoding="utf-8"))
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise ResultsError(f"{path}: missing {', '.join(missing)}")
    if data["commit_role"] not in ("measured", "recorded"):
        raise ResultsError(f"{path}: commit_role must be 'measured' or 'recorded'")
    return data


def _cell(value, fmt: str | None = None) -> str:
    if value is None or value == "":
        return ""
    if fmt:
        text = fmt.format(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        text = f"{value:,}"
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def commit_text(data: dict) -> str:
    """'a4eb3fa' when the figure was measured on that commit; 'recorded in 437e4fa' when
    that is the first commit quoting it (the code measured is that one or an earlier one)."""
    if data["commit_role"] == "measured":
        return f"`{data['commit']}`"
    return f"recorded in `{data['commit']}`"


def headline(data: dict) -> str:
    try:
        return data["headline"].format(**data["values"])
    except (KeyError, IndexError, ValueError) as error:
        raise ResultsError(f"headline {data['headline']!r}: {error}") from None


def provenance(name: str, data: dict) -> str:
    parts = [f"Machine: {data['machine']}.", f"Command: `{data['command']}`.",
             f"Commit {commit_text(data)}, {data['date']}."]
    if data.get("conditions"):
        parts.append(f"Conditions: {data['conditions']}.")
    if data.get("reference"):
        parts.append(f"Reference: {data['reference']}.")
    parts.append(f"Data: `results/{name}.json`.")
    return " ".join(parts)


def render_summary(results_dir: pathlib.Path, names: list[str]) -> list[str]:
    rows = []
    for name in names:
        data = load(results_dir, name)
        rows.append([_cell(data.get("title", data["what"])), _cell(headline(data)),
                     f"`{_cell(data.get('short_command', data['command']))}`",
                     _cell(data["machine"]), data["date"], commit_text(data)])
    return _table(["what", "figure", "command", "machine", "date", "commit"], rows)


def render_table(results_dir: pathlib.Path, name: str) -> list[str]:
    data = load(results_dir, name)
    if "rows" not in data or "columns" not in data:
        raise ResultsError(f"results/{name}.json has no rows or columns to tabulate")
    columns = data["columns"]
    rows = [[_cell(row.get(column["key"]), column.get("format")) for column in columns]
            for row in data["rows"]]
    return ([f"{data['what']}."] + [""] + _table([column["label"] for column in columns], rows)
            + ["", provenance(name, data)])


def render_values(results_dir: pathlib.Path, name: str) -> list[str]:
    data = load(results_dir, name)
    units = data["units"]
    rows = [[f"`{key}`", _cell(value), _cell(units.get(key, ""))]
            for key, value in data["values"].items()]
    return ([f"{data['what']}."] + [""] + _table(["value", "figure", "unit"], rows)
            + ["", provenance(name, data)])


def render_sentences(results_dir: pathlib.Path, name: str) -> list[str]:
    data = load(results_dir, name)
    if not data.get("sentences"):
        raise ResultsError(f"results/{name}.json has no sentences to render")
    try:
        text = " ".join(sentence.format(**data["values"]) for sentence in data["sentences"])
    except (KeyError, IndexError, ValueError) as error:
        raise ResultsError(f"results/{name}.json sentences: {error}") from None
    return [f"{text} (Data: `results/{name}.json`.)"]


def render_block(kind: str, args: list[str], results_dir: pathlib.Path) -> str:
    if kind not in KINDS:
        raise ResultsError(f"unknown results kind {kind!r} (known: {', '.join(KINDS)})")
    if not args or (kind != "summary" and len(args) != 1):
        raise ResultsError(f"results:{kind} needs {'files' if kind == 'summary' else 'one file'}")
    if kind == "summary":
        lines = render_summary(results_dir, args)
    elif kind == "table":
        lines = render_table(results_dir, args[0])
    elif kind == "values":
        lines = render_values(results_dir, args[0])
    else:
        lines = render_sentences(results_dir, args[0])
    return "\n".join(lines) + "\n"


def render_document(text: str, results_dir: pathlib.Path) -> str:
    """`text` with the body of every results marker replaced by its rendering."""
    def replace(match: re.Match) -> str:
        body = render_block(match["kind"], match["args"].split(), results_dir)
        return f"{match['open']}\n{body}{match['close']}"
    return MARKER.sub(replace, text)


def markers(text: str) -> list[str]:
    """The opening markers of `text`, in order."""
    return [match["open"] for match in MARKER.finditer(text)]


@dataclasses.dataclass
class Outcome:
    path: pathlib.Path
    tables: int
    stale: bool


def process(paths: list[pathlib.Path], results_dir: pathlib.Path, write: bool) -> list[Outcome]:
    """Render every file of `paths`; write those whose tables changed if `write`."""
    outcomes = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        rendered = render_document(text, results_dir)
        stale = rendered != text
        if stale and write:
            path.write_text(rendered, encoding="utf-8")
        outcomes.append(Outcome(path, len(markers(text)), stale))
    return outcomes


def default_documents(root: pathlib.Path) -> list[pathlib.Path]:
    """The documents that may hold result tables: README.md, bench/README.md, docs/**/*.md."""
    found = [root / "README.md", root / "bench" / "README.md"]
    found += sorted((root / "docs").rglob("*.md"))
    return [path for path in found if path.is_file()]
