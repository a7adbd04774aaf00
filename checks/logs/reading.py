"""Reading a log's tail: whether it can be judged at all, which lines are errors (text or
JSON lines), each error record's stamp, and the newest stamp in UTC.

The glue between what the host printed (parse/logtail.py) and the timestamp parser
(parse/timestamps.py); the judging module decides what the results mean."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any

from fleetcheck.core.hostfacts import LogSpec

if TYPE_CHECKING:  # the parsers load only when a patrol reads a log
    from fleetcheck.parse.logformats import Detection
    from fleetcheck.parse.logtail import LogFacts
    from fleetcheck.parse.timestamps import Resolved, Stamp

NEWEST_WINDOW = 50  # the newest stamp is the max over this many stamped lines from the end


def record_stamps(lines: list[str], errors: list[int], find: Any) -> list[tuple[int, Stamp]]:
    """Each error line's record stamp: its own, else the nearest stamped line above it (a
    traceback's continuation lines belong to the record that logged it), one (record index,
    stamp) per distinct record; an error line with none within 200 lines is left out."""
    cache: dict[int, Stamp | None] = {}

    def stamp_at(i: int) -> Stamp | None:
        if i not in cache:
            cache[i] = find(lines[i])
        return cache[i]

    records: dict[int, Stamp] = {}
    for i in errors:
        for j in range(i, max(i - 200, -1), -1):
            st = stamp_at(j)
            if st is not None:
                records[j] = st
                break
    return sorted(records.items())


def unreadable_tail(lf: LogFacts, spec: LogSpec) -> str | None:
    """Why the tail cannot be judged at all (changed while read, binary), or None. An empty
    file is judged (by its mtime: judging.empty_verdict), not unreadable."""
    from fleetcheck.parse.logtail import looks_binary, size_text

    assert lf.size is not None
    tail = lf.tail
    if len(tail) < min(lf.size, spec.tail_bytes):
        # stat saw more than tail could read: the file was rotated or truncated in between,
        # so the tail and the mtime describe different files; judge nothing from either
        return (
            f"changed while being read (stat: {size_text(lf.size)}, read "
            f"{size_text(len(tail))}): rotated or truncated; the next patrol reads the new file"
        )
    if looks_binary(tail):
        return f"looks binary (control bytes in the last {size_text(len(tail))}), not a text log"
    return None


@dataclass(frozen=True)
class Lines:
    """A tail's lines, read: JSON or text, which are errors, how to find a line's stamp."""

    json_lines: bool
    errors: list[int]  # indexes of the error lines
    records: list[tuple[int, Stamp]]  # the error records placed in time
    find: Callable[[str], Stamp | None]
    detection: Detection | None = None  # the library format, when no format/regex is set


def read_lines(lines: list[str], spec: LogSpec, mtime: float | None = None) -> Lines:
    """Which lines are errors (the same `error_regex` on every host; for JSON lines their
    level too) and each error record's stamp. A text tail with no `format`/`regex` is read
    in the library format detected from the tail itself."""
    from fleetcheck.parse import jsonlog
    from fleetcheck.parse.timestamps import find_with

    err_rx = re.compile(spec.error_regex)
    json_lines = spec.format == "json" or (
        spec.format is None and spec.regex is None and jsonlog.looks_like_json(lines)
    )
    if not json_lines:
        detection = None
        find_text: Callable[[str], Stamp | None]
        if spec.format is None and spec.regex is None:
            from fleetcheck.parse.logformats import detect

            detection = detect(lines, mtime)
            find_text = detection.find
        else:
            rx = re.compile(spec.regex) if spec.regex else None

            def find_override(line: str) -> Stamp | None:
                return find_with(line, spec.format, rx)

            find_text = find_override

        errors = [i for i, line in enumerate(lines) if err_rx.search(line)]
        records = record_stamps(lines, errors, find_text)
        return Lines(False, errors, records, find_text, detection)
    objects = [jsonlog.parse_object(line) for line in lines]
    errors = []
    for i, (line, obj) in enumerate(zip(lines, objects, strict=True)):
        if obj is None:
            if err_rx.search(line):
                errors.append(i)  # a raw line among JSON (a crash's traceback) counts
        elif jsonlog.is_error(obj, line, err_rx):
            errors.append(i)
    by_line = {line: obj for line, obj in zip(lines, objects, strict=True)}

    def find_json(line: str) -> Stamp | None:
        obj = by_line.get(line)
        return None if obj is None else jsonlog.object_stamp(obj, spec.time_field)

    placed = [i for i in errors if objects[i] is not None]
    records = [(i, st) for i in placed if (st := find_json(lines[i])) is not None]
    return Lines(True, errors, records, find_json)


def newest_stamped(
    lines: list[str], find: Callable[[str], Stamp | None]
) -> list[tuple[str, Stamp]]:
    """The last NEWEST_WINDOW stamped lines, newest first (threads may interleave, so the
    newest is the max over them, not the last line)."""
    stamped: list[tuple[str, Stamp]] = []
    for line in reversed(lines):
        stamp = find(line)
        if stamp is not None:
            stamped.append((line, stamp))
            if len(stamped) >= NEWEST_WINDOW:
                break
    return stamped


def no_stamp(
    lines: list[str],
    spec: LogSpec,
    json_lines: bool,
    tail_size: int,
    detection: Detection | None = None,
) -> str:
    """Why no line could be placed in time; for a tail in no library format, the formats
    nearest to it and the `format`/`regex` setting to add, written from its last line."""
    from fleetcheck.parse import jsonlog
    from fleetcheck.parse.logtail import size_text

    if json_lines:
        what = f"JSON time field ({spec.time_field or ', '.join(jsonlog.TIME_FIELDS)})"
    else:
        what = f"format {spec.format!r}" if spec.format else "regex" if spec.regex else "format"
    advice = ""
    if detection is not None:
        from fleetcheck.parse.logformats.advice import closest, suggestion

        last = next((line for line in reversed(lines) if line.strip()), lines[-1])
        advice = f"; closest tried: {', '.join(closest(detection, last))}; {suggestion(last)}"
    return (
        f"no parseable timestamp in the last {len(lines)} lines "
        f"({size_text(tail_size)}; no recognised {what}){advice}; last line: {lines[-1][:80]!r}"
    )


def newest_of(
    stamped: list[tuple[str, Stamp]], zone: tzinfo, zone_name: str, now: datetime, hint: datetime
) -> tuple[str, Stamp, Resolved]:
    """The newest of the stamped lines in UTC: (line, its stamp, the stamp resolved)."""
    from fleetcheck.parse.timestamps import resolve

    resolved = [(line, s, resolve(s, zone, zone_name, now, hint=hint)) for line, s in stamped]
    return max(resolved, key=lambda item: item[2].utc)


def utc_times(
    stamps: list[Stamp], zone: tzinfo, zone_name: str, now: datetime, hint: datetime
) -> list[datetime]:
    """UTC moments of many stamps, each placed as the newest line is (DST, missing year)."""
    from fleetcheck.parse.timestamps import resolve

    return [resolve(s, zone, zone_name, now, hint=hint).utc for s in stamps]
