"""The one line of an error's text that says what went wrong, for messages and records
(plain Python: it reads text, never imports TensorFlow).

A TensorFlow error raised while a graph runs starts with "Graph execution error:",
then the Python stack where the op was defined, then the op's own message ("indices =
10 is not in [0, 2)", "OOM when allocating tensor with shape[...] and type float on
/job:...") and node and op names. An error of an eagerly run op starts with
"{{function_node ...}}". `summary` keeps the op's message without the device and node
names; any other text gives its first line.
"""
from __future__ import annotations

import re

_GRAPH_HEADER = "Graph execution error:"
_DEFINED_AT = "Detected at node"
_FUNCTION_NODE = re.compile(r"^\{\{function_node [^}]*\}\}\s*")
_TRAILING_NAMES = re.compile(r"(\s*\[\[\{\{node [^]]*\]\])?(\s*\[Op:[^]]*\](\s*name:.*)?)?$")
_DEVICE = re.compile(r" on /job:\S+( by allocator \S+)?")


def summary(error: BaseException | str) -> str:
    """The line of `error` (an exception, its `message` preferred, or text) that says what
    went wrong, TensorFlow's graph and op framing removed; the exception's type name when
    the text is empty."""
    if isinstance(error, str):
        text, name = error, "error"
    else:
        text, name = getattr(error, "message", None) or str(error), type(error).__name__
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if lines and lines[0].strip() == _GRAPH_HEADER:
        # The op's message is the first unindented line after the definition stack.
        lines = [line for line in lines[1:]
                 if not line.startswith((" ", "\t")) and not line.startswith(_DEFINED_AT)]
    if not lines:
        return name
    line = _FUNCTION_NODE.sub("", lines[0].strip())
    line = _DEVICE.sub("", _TRAILING_NAMES.sub("", line)).strip()
    return line or name
