"""What the logs check's journal fragment printed on a host (`journalctl -r -o json`, the
newest entry whole, other error entries compacted to `e REALTIME PRIORITY`, then `@@rc N`,
`n COUNT`, and `@@any` when nothing matched). Pure.

Fields are read by regexes anchored on `{` or `,` before the key's quote, which cannot occur
inside a JSON string: a MESSAGE quoting JSON cannot fake a time or a priority."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from fleetcheck.parse.gathered import MAX_EPOCH

_REALTIME = re.compile(r'[{,]"__REALTIME_TIMESTAMP":"(\d+)"')
_PRIORITY = re.compile(r'[{,]"PRIORITY":"(\d)"')

DENIED_MARKS = (
    "insufficient permissions",
    "not seeing messages from other users",
    "permission denied",
)


@dataclass(frozen=True)
class JournalRead:
    """One journal query's answer."""

    times_us: tuple[int, ...]  # __REALTIME_TIMESTAMP, newest first: the newest entry, then
    # (compacted on the host) only the error entries, or every entry when not compacted
    priorities: tuple[int | None, ...]  # the same entries' PRIORITY (None: not set)
    newest_message: str | None
    rc: int | None  # journalctl's exit status; None when the output was cut at the byte bound
    notes: tuple[str, ...]  # journalctl's own words (stderr), in order
    any_newest_us: int | None = None  # newest entry of the whole journal, when asked
    any_asked: bool = False
    count: int = 0  # how many entries the query returned (the window the errors are in)

    @property
    def denied(self) -> bool:
        text = " ".join(self.notes).lower()
        return any(mark in text for mark in DENIED_MARKS)


_DIGITS = re.compile(r"[0-9]{1,20}")


def _usable_us(text: str, notes: list[str]) -> int | None:
    """`text` as a realtime stamp in µs, or None (with a note) when it cannot be one: past
    9999 (a broken clock or a corrupt journal) it is skipped, never an internal error."""
    if _DIGITS.fullmatch(text) is None or int(text) > MAX_EPOCH * 1_000_000:
        notes.append(f"journal entry with an unusable time skipped: {text[:40]!r}")
        return None
    return int(text)


def _entries(
    lines: list[str],
) -> tuple[list[int], list[int | None], str | None, list[str], int | None]:
    times: list[int] = []
    prios: list[int | None] = []
    notes: list[str] = []
    newest_message = None
    count = None
    for line in lines:
        if line.startswith("n ") and _DIGITS.fullmatch(line[2:]):  # the host's count of entries
            count = int(line[2:])
            continue
        if line.startswith("e "):  # compacted on the host: `e REALTIME PRIORITY`
            parts = line.split(" ")
            if len(parts) == 3 and parts[1]:
                us = _usable_us(parts[1], notes)
                if us is not None:
                    times.append(us)
                    prios.append(int(parts[2]) if _DIGITS.fullmatch(parts[2]) else None)
            continue
        if not line.startswith("{"):
            if line.strip() and not line.startswith("-- "):  # "-- No entries --" (old systemd)
                notes.append(line.strip())
            continue
        if not line.endswith("}"):
            continue  # cut at the byte bound
        m = _REALTIME.search(line)
        if m is None:
            continue
        us = _usable_us(m.group(1), notes)
        if us is None:
            continue
        times.append(us)
        p = _PRIORITY.search(line)
        prios.append(int(p.group(1)) if p else None)
        if newest_message is None:
            newest_message = _message(line)
    return times, prios, newest_message, notes, count


def _message(line: str) -> str:
    try:
        value = json.loads(line).get("MESSAGE")
    except (ValueError, RecursionError, AttributeError):
        return ""
    if isinstance(value, list):  # binary-safe form: a list of byte values
        try:
            return bytes(value).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return ""
    return value if isinstance(value, str) else ""


def _rc(lines: list[str]) -> tuple[list[str], int | None]:
    for i in range(len(lines) - 1, -1, -1):
        m = re.fullmatch(r"@@rc (\d+)", lines[i])
        if m:
            return lines[:i], int(m.group(1))
    return lines, None


def parse_journal_output(text: str) -> JournalRead:
    main, sep, rest = text.partition("\n@@any\n")
    if not sep and text.startswith("@@any\n"):
        main, rest, sep = "", text[len("@@any\n") :], "@@any"
    lines = main.split("\n")
    count_lines = [x for x in lines if x.startswith("n ")]
    body, rc = _rc([x for x in lines if not x.startswith("n ")])
    times, prios, message, notes, count = _entries(body + count_lines)
    any_newest = None
    if sep:
        any_body, any_rc = _rc(rest.split("\n"))
        any_times, _, _, any_notes, _ = _entries(any_body)
        any_newest = max(any_times) if any_times else None
        notes += [n for n in any_notes if n not in notes]
    return JournalRead(
        tuple(times),
        tuple(prios),
        message,
        rc,
        tuple(notes),
        any_newest,
        bool(sep),
        count if count is not None else len(times),
    )


@dataclass(frozen=True)
class JournalFacts:
    label: str  # what the query selects: a unit and/or matches
    state: str  # "ok", "no-journalctl", "error"
    detail: str = ""
    read: JournalRead | None = None


def parse_journal_facts(label: str, rc: int, text: str) -> JournalFacts:
    """The fragment's answer for the query `label` names, or why there is none."""
    first = text.split("\n", 1)[0].strip()
    if first == "state no-journalctl":
        return JournalFacts(label, "no-journalctl", "journalctl not found on the host")
    if "@@rc" not in text and not text.lstrip().startswith("{"):
        return JournalFacts(label, "error", f"unexpected output from the host (rc {rc})")
    return JournalFacts(label, "ok", "", parse_journal_output(text))
