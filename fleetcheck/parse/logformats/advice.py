"""What to tell an operator whose tail no library format reads: the closest formats tried and
the `format`/`regex` setting to add, written from the line itself.

The closest formats are those that read some lines (too few to be trusted), else those whose
sample line looks most like the tail's line (digits as digits, letters as letters). The
setting is a `regex` that matches the line's own stamp-like text (every digit a `\\d`) with a
`format` guessed from it: a suggestion to check, never applied by us. Pure."""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from fleetcheck.parse.logformats.catalog import FORMATS, LogFormat
from fleetcheck.parse.logformats.detect import TRUST_LINES, Detection

# stamp-like text: digits and the separators stamps use, with a time of day inside
_STAMPISH = re.compile(r"\d[\d\-/.,:T ]*?\d{1,2}:\d{1,2}(?::\d{1,2})?(?:[.,:]\d+)?")


def _shape(text: str) -> str:
    """The line's look where a stamp usually sits: digits as 9, words as a, its first 20."""
    return re.sub(r"[A-Za-z]+", "a", re.sub(r"\d", "9", text))[:20]


def closest(detection: Detection, line: str, n: int = 3) -> list[str]:
    """Up to `n` formats nearest the tail, each with why: `klog (read 1 of 16 lines)`."""
    out = [
        f"{t.fmt.name} (read {t.hits} of {t.sample} lines, {t.doubt})"
        if t.doubt
        else f"{t.fmt.name} (read {t.hits} of {t.sample} lines, needs {TRUST_LINES})"
        for t in detection.tried[:n]
    ]
    if len(out) < n:
        shape = _shape(line)
        named = {t.fmt.name for t in detection.tried}

        def score(fmt: LogFormat) -> float:
            return SequenceMatcher(None, shape, _shape(fmt.sample)).ratio()

        rest = sorted((f for f in FORMATS if f.name not in named), key=score, reverse=True)
        out += [f"{f.name} (like {f.sample[:32]!r})" for f in rest[: n - len(out)]]
    return out


_TIME = re.compile(r"(\d{1,2}):(\d{1,2})(?::(\d{1,2}))?(?:([.,:])(\d+))?")


def _guess_date(text: str) -> str:
    """Date digits as strptime: a 4-digit run is the year (first: Y m d; last: d m Y), 8 or 6
    digits are YYYYMMDD or YYMMDD, two runs month then day, three two-digit runs y m d."""
    tokens = re.findall(r"\d+|\D", text)
    runs = [t for t in tokens if t.isdigit()]
    if len(runs) == 1 and len(runs[0]) in (6, 8):
        names = ["%y%m%d" if len(runs[0]) == 6 else "%Y%m%d"]
    elif runs and len(runs[0]) == 4:
        names = ["%Y", "%m", "%d"]
    elif runs and len(runs[-1]) == 4:
        us = "/" in text and int(runs[0]) <= 12  # 11/29/2026; 29.11.2026 and 29/11/2026 not
        names = (
            (["%m", "%d", "%Y"] if us else ["%d", "%m", "%Y"]) if len(runs) == 3 else ["%m", "%Y"]
        )
    elif len(runs) == 3:
        names = ["%y", "%m", "%d"]
    else:
        names = ["%d", "%m"] if runs and int(runs[0]) > 12 else ["%m", "%d"]
    out, i = [], 0
    for t in tokens:
        if t.isdigit():
            out.append(names[i] if i < len(names) else "%d")
            i += 1
        else:
            out.append(t)
    return "".join(out)


def _guess_format(text: str) -> str:
    """A strptime format for stamp-like `text` (its time of day H:M:S, a fraction after it)."""
    m = _TIME.search(text)
    if m is None:
        return _guess_date(text)
    time = "%H:%M" + (":%S" if m.group(3) else "") + (f"{m.group(4)}%f" if m.group(5) else "")
    return _guess_date(text[: m.start()]) + time + text[m.end() :]


def suggestion(line: str) -> str:
    """The setting to add for `line`: `regex = '...(?P<ts>...)'` and a `format` to check."""
    m = _STAMPISH.search(line)
    if m is None:
        return "set regex with a group ts around the line's timestamp (no time of day seen)"
    text = m.group(0).strip()
    rx = re.sub(r"\d", r"\\d", re.escape(text)).replace("\\ ", " ")
    fmt = _guess_format(text)
    return f"e.g. regex = '(?P<ts>{rx})', format = \"{fmt}\" (check the order of day and month)"
