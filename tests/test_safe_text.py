"""core.safe_text, table-driven: which characters become visible escapes, which stay, and the
shapes (one line, trees, identity for clean text); then the places that must use it (Result,
Report, the stderr writer) on the same table."""

from __future__ import annotations

import io
import re
import unicodedata

import pytest

from fleetcheck.core import stderr
from fleetcheck.core.model import Report, Result, Standing, Status
from fleetcheck.core.safe_text import one_line, printable, printable_tree

# Everything safe_text promises to neutralise, by the test's own definition (not the module's
# regex): C0 but tab, DEL, C1, the line/paragraph separators and the bidi formatting controls.
FORBIDDEN = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)

CASES = [
    # (name, input, expected printable())
    ("plain ascii", "queue depth 167 > cap 100", "queue depth 167 > cap 100"),
    ("tab kept", "a\tb", "a\tb"),
    ("CSI clear screen", "x\x1b[2Jy", "x\\x1b[2Jy"),
    ("OSC title with BEL", "\x1b]0;PWNED\x07", "\\x1b]0;PWNED\\x07"),
    ("OSC with ST", "\x1b]8;;http://evil\x1b\\link", "\\x1b]8;;http://evil\\x1b\\link"),
    ("DCS", "\x1bPq#0\x1b\\", "\\x1bPq#0\\x1b\\"),
    ("RIS full reset", "\x1bc", "\\x1bc"),
    ("BEL", "ding\x07", "ding\\x07"),
    ("backspace", "OK\x08\x08CRIT", "OK\\x08\\x08CRIT"),
    ("carriage return", "CRIT\rOK  ", "CRIT\\x0dOK  "),
    ("line feed", "a\nb", "a\\x0ab"),
    ("vertical tab and form feed", "a\x0bb\x0cc", "a\\x0bb\\x0cc"),
    ("NUL", "a\x00b", "a\\x00b"),
    ("unit separator (last C0)", "\x1f", "\\x1f"),
    ("DEL", "a\x7fb", "a\\x7fb"),
    ("C1 CSI", "\x9b2J", "\\x9b2J"),
    ("C1 OSC and ST", "\x9d0;x\x9c", "\\x9d0;x\\x9c"),
    ("C1 first and NEL", "\x80\x85", "\\x80\\x85"),
    ("bidi override", "gnp.\u202eexe", "gnp.\\u202eexe"),
    ("bidi isolates", "\u2066a\u2069\u2067b\u2068", "\\u2066a\\u2069\\u2067b\\u2068"),
    ("bidi marks", "\u200e\u200f\u061c", "\\u200e\\u200f\\u061c"),
    ("line and paragraph separators", "a\u2028b\u2029", "a\\u2028b\\u2029"),
    ("latin-1 letters stay", "café über", "café über"),
    ("no-break space stays", "a\u00a0b", "a\u00a0b"),
    ("emoji and CJK stay", "ok ✓ 東京 🚀", "ok ✓ 東京 🚀"),
    ("replacement char stays", "bad \ufffd byte", "bad \ufffd byte"),
    ("a visible escape is not doubled", "\\x1b[2J", "\\x1b[2J"),
]


@pytest.mark.parametrize(("name", "text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_printable(name: str, text: str, expected: str) -> None:
    out = printable(text)
    assert out == expected
    assert not FORBIDDEN.search(out)
    assert printable(out) == out  # idempotent: a row rebuilt from history is not re-escaped


def test_every_forbidden_code_point_is_escaped_and_nothing_else_is() -> None:
    """The rule, exhaustively over the BMP's first 0x3000 code points: exactly the forbidden
    ones change, each into its own visible escape."""
    for code in range(0x3000):
        ch = chr(code)
        out = printable(ch)
        if FORBIDDEN.match(ch):
            assert out == (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"), hex(code)
        else:
            assert out == ch, hex(code)


def test_no_control_survives_anywhere_in_the_output() -> None:
    """Whatever the input, no output character is a Unicode control (Cc) or one of the
    formatting characters that reorder text."""
    hostile = "".join(chr(c) for c in range(0x00, 0xA0)) + "\u202a\u202b\u202c\u202d\u202e"
    out = printable(hostile)
    assert [c for c in out if unicodedata.category(c) == "Cc" and c != "\t"] == []
    assert not FORBIDDEN.search(out)


def test_clean_text_is_returned_as_is() -> None:
    text = "n8: 12 connections from 198.18.0.10"
    assert printable(text) is text


ONE_LINE = [
    ("LF becomes a space", "ERR\nwrong type", "ERR wrong type"),
    ("CRLF becomes a space", "ERR\r\nwrong type", "ERR wrong type"),
    ("lone CR stays visible", "CRIT\rOK", "CRIT\\x0dOK"),
    ("controls still escaped", "a\n\x1b[2J", "a \\x1b[2J"),
    ("no line break: as printable", "\x07", "\\x07"),
]


@pytest.mark.parametrize(("name", "text", "expected"), ONE_LINE, ids=[c[0] for c in ONE_LINE])
def test_one_line(name: str, text: str, expected: str) -> None:
    out = one_line(text)
    assert out == expected
    assert "\n" not in out and not FORBIDDEN.search(out)


TREES = [
    ("string", "\x1b[2J", "\\x1b[2J"),
    ("dict keys and values", {"a\x1b": "b\x07"}, {"a\\x1b": "b\\x07"}),
    ("nested list", {"x": ["\x9b", 1, None]}, {"x": ["\\x9b", 1, None]}),
    ("tuple stays a tuple", ("\u202e", 2), ("\\u202e", 2)),
    (
        "numbers and None untouched",
        {"n": 1.5, "m": None, "b": True},
        {"n": 1.5, "m": None, "b": True},
    ),
    ("non-string keys kept", {1: "\x08"}, {1: "\\x08"}),
]


@pytest.mark.parametrize(("name", "value", "expected"), TREES, ids=[c[0] for c in TREES])
def test_printable_tree(name: str, value: object, expected: object) -> None:
    out = printable_tree(value)
    assert out == expected
    assert type(out) is type(expected)


def test_a_clean_tree_is_returned_as_is() -> None:
    tree = {"logs": [{"path": "/var/log/w.log", "age_s": 5}], "n": (1, 2)}
    assert printable_tree(tree) is tree


HOSTILE = "\x1b]0;PWNED\x07\x1b[2J\r\x08\x9b31m\u202eevil\x7f\nline"


def test_result_makes_every_text_field_safe() -> None:
    """What a check or a rebuilt history line puts in a Result comes out safe in every text
    field a renderer prints."""
    r = Result(
        check="logs" + HOSTILE,
        host="n8" + HOSTILE,
        status=Status.CRIT,
        summary="host shell failed: " + HOSTILE,
        metrics={"by_dev": {HOSTILE: 1}},
        evidence={"stderr": [HOSTILE], HOSTILE: HOSTILE},
        limits={HOSTILE: 3},
        headline=HOSTILE,
    )
    texts = [r.check, r.host, r.summary, r.headline, Standing("2026-11-29" + HOSTILE).since]
    texts += list(r.metrics["by_dev"]) + list(r.limits) + r.evidence["stderr"]
    texts += [k for k in r.evidence] + [v for v in r.evidence.values() if isinstance(v, str)]
    for text in texts:
        assert isinstance(text, str) and not FORBIDDEN.search(text), repr(text)
    assert "\\x1b]0;PWNED\\x07" in r.summary
    assert "\n" not in r.summary  # one line
    # the JSON shape too (every key and string value, however deep)
    assert [t for t in strings(r.to_dict()) if FORBIDDEN.search(t)] == []


def strings(value: object) -> list[str]:
    """Every string in a JSON-shaped value, dict keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [*strings(k), *strings(v)]]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings(v)]
    return []


def test_report_notes_are_safe() -> None:
    rep = Report("2026-11-29T07:00:00Z", 1.0, (), notes=("slowed down: " + HOSTILE,))
    assert all(not FORBIDDEN.search(n) for n in rep.notes)
    assert "\\x1b[2J" in rep.notes[0]


@pytest.mark.parametrize("writer", [stderr.warn, stderr.error, stderr.say])
def test_stderr_lines_are_one_safe_line(writer: object) -> None:
    buf = io.StringIO()
    writer("state file /tmp/x: " + HOSTILE, buf)  # type: ignore[operator]
    text = buf.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1
    assert not FORBIDDEN.search(text[:-1])
    assert "\\x1b]0;PWNED\\x07" in text


def test_every_escaped_character_is_one_isprintable_refuses() -> None:
    """printable's fast path returns text that str.isprintable accepts unchanged: sound only
    while every character the escaping regex matches is one isprintable refuses (a Python
    whose Unicode tables called one printable would let it through raw)."""
    from fleetcheck.core.safe_text import _CONTROL

    escaped = [c for c in map(chr, range(0x110000)) if _CONTROL.match(c)]
    assert len(escaped) > 60  # C0, DEL, C1, the separators and the bidi controls
    assert [c for c in escaped if c.isprintable()] == []
    # and through the fast path: each comes back escaped, alone and inside printable text
    for c in escaped:
        assert printable("ok " + c + " ok") != "ok " + c + " ok"
