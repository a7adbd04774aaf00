"""What the logs check's shell fragments printed on a host, read (pure): a file's `stat`
and tail, the host's zone. The check judges; nothing here decides a status."""

from __future__ import annotations

from dataclasses import dataclass

from fleetcheck.parse.gathered import epoch_problem
from fleetcheck.zones import zone_named


@dataclass(frozen=True)
class LogFacts:
    path: str
    state: str  # "ok", "missing", "denied", "not-regular", "error"
    detail: str = ""  # the host's own words for a non-ok state
    mtime: float | None = None  # epoch seconds (host clock)
    size: int | None = None
    tail: bytes = b""


@dataclass(frozen=True)
class ZoneFacts:
    """What `tz = "auto"` found on the host."""

    name: str | None  # an IANA zone, when one was found
    how: str  # where it came from, or why nothing was found
    offset: str | None = None  # `date +%z` on the host, e.g. "-0500"


def parse_log_output(path: str, rc: int, out: bytes) -> LogFacts:
    head, sep, tail = out.partition(b"\ntail\n")
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    if first.startswith("state "):
        word, _, rest = first[6:].partition(" ")
        if word == "error":
            low = rest.lower()
            if "no such file" in low:
                return LogFacts(path, "missing", "no such file")
            if "permission denied" in low:
                return LogFacts(path, "denied", "permission denied")
            if "not a directory" in low:
                return LogFacts(path, "missing", "a parent is not a directory")
            return LogFacts(path, "error", rest.strip() or f"stat failed (rc {rc})")
        if word == "denied":
            return LogFacts(path, "denied", "permission denied")
        if word == "not-regular":
            return LogFacts(path, "not-regular", "not a regular file")
        return LogFacts(path, "error", first)
    if not sep or not first.startswith("stat "):
        return LogFacts(path, "error", f"unexpected output from the host (rc {rc})")
    try:
        mtime_s, size_s = first[5:].split()[:2]
        mtime, size = float(mtime_s), int(size_s)
    except ValueError:
        return LogFacts(path, "error", f"cannot read stat output {first[:80]!r}")
    problem = epoch_problem(mtime)
    if problem is not None:
        return LogFacts(
            path,
            "error",
            f"host reported an unusable time: {problem} (stat mtime {mtime_s[:40]!r})",
        )
    if size < 0:
        return LogFacts(path, "error", f"host reported an unusable size: {size_s[:40]!r} bytes")
    return LogFacts(path, "ok", "", mtime, size, tail)


def parse_zone_output(text: str) -> ZoneFacts:
    """Which zone the host runs in: $TZ, then /etc/localtime's link, then /etc/timezone, then
    timedatectl. Only an IANA name that this machine's tzdata knows is accepted."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    offset = values.get("offset") or None
    tried = []
    for key, label in (
        ("TZ", "$TZ"),
        ("localtime", "/etc/localtime"),
        ("etc_timezone", "/etc/timezone"),
        ("timedatectl", "timedatectl"),
    ):
        raw = values.get(key, "")
        if not raw:
            continue
        name = raw.lstrip(":")
        if "zoneinfo/" in name:
            name = name.split("zoneinfo/", 1)[1]
        name = name.removeprefix("posix/").removeprefix("right/")
        try:
            zone_named(name)
        except ValueError:
            tried.append(f"{label} {raw!r} is not an IANA zone")
            continue
        return ZoneFacts(name, f"{label} ({raw})", offset)
    how = "; ".join(tried) if tried else "no $TZ, /etc/localtime link, /etc/timezone or timedatectl"
    return ZoneFacts(None, how, offset)


CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27)) + b"\x7f"


def looks_binary(data: bytes) -> bool:
    """More than 5% control bytes (tabs, newlines and ANSI escapes do not count)."""
    if not data:
        return False
    controls = len(data) - len(data.translate(None, CONTROL_BYTES))
    return controls > len(data) * 0.05


def size_text(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def complete_lines(tail: bytes, size: int) -> list[str]:
    """The tail's complete lines: without the partial first line when the tail began
    mid-file, and without the empty string after a final newline."""
    lines = tail.decode("utf-8", "replace").split("\n")
    if size > len(tail):  # the tail began mid-line: drop the partial first line
        lines = lines[1:]
    if lines and lines[-1] == "":
        lines.pop()
    return lines
