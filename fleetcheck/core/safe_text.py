"""The one function that makes text from the network safe to print.

Summaries, evidence and warnings carry text remote parties control (an SSH banner, a host's
stderr, an interface name, a broker's error reply). Printed raw, an escape sequence rewrites
the operator's terminal, and a carriage return or a backspace makes cron mail and Nagios text
say something other than what was measured. So every string that enters a `Result` or a
warning passes through `printable`, which replaces each control character with a visible
escape (`\\x1b`, `\\u202e`) and keeps everything else, tab included.

What counts as control: C0 (U+0000-U+001F) but tab, DEL, C1 (U+0080-U+009F), the Unicode line
and paragraph separators, and the bidirectional formatting characters (which reorder what a
terminal or browser shows, so a reason could read as something else).
"""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character replaced by a visible escape (tab kept); text
    without one comes back as the same object. `str.isprintable` first: every character the
    regex escapes is one it refuses (a test walks all of Unicode), and it is the quicker."""
    if text.isprintable() or _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_escape, text)


def one_line(text: str) -> str:
    """`text` as one safe line: line breaks (LF, CRLF) become a space, then `printable` (a
    lone CR, which would overwrite the line on a terminal, still shows as an escape)."""
    if "\n" in text:
        text = text.replace("\r\n", " ").replace("\n", " ")
    return printable(text)


def printable_tree(value: Any) -> Any:
    """`value` with `printable` applied to every string in it, dict keys included.

    For evidence and metric maps: JSON-shaped data. Containers are copied only where a
    string in them changed. Every row's evidence, metrics and limits pass here, so the exact
    JSON types are tested first and clean containers are walked without copying (a quarter of
    the general walk's cost, `_copied`).
    """
    kind = type(value)
    if kind is str:
        return value if value.isprintable() else printable(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        for key, item in value.items():
            if type(key) is str and key.isprintable() or type(key) in _SCALARS:
                kind = type(item)
                if kind is str and item.isprintable() or kind in _SCALARS:
                    continue
                if (kind is dict or kind is list or kind is tuple) and (
                    printable_tree(item) is item
                ):
                    continue
            return _copied(value)  # something in it changes (or is of another kind)
        return value
    if kind is list or kind is tuple:
        kinds = set(map(type, value))
        if kinds <= _SCALARS:
            return value
        if kinds <= _STR_OR_SCALAR and all(x.isprintable() for x in value if type(x) is str):
            return value
    return _copied(value)


def _copied(value: Any) -> Any:
    """printable_tree's general case: any kind of container or string (subclasses too), a
    copy where a string in it changes."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        out = {}
        changed = False
        for key, item in value.items():
            new_key = printable(key) if isinstance(key, str) else key
            new_item = printable_tree(item)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value
    if isinstance(value, (list, tuple)):
        items = [printable_tree(item) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(items) if isinstance(value, tuple) else items
    return value


_SCALARS = frozenset({int, float, bool, type(None)})
_STR_OR_SCALAR = _SCALARS | {str}
