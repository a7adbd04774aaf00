"""Which library format a tail is written in, decided from the tail itself.

Every format is tried on a sample of the newest lines that can hold a stamp (a digit, no
leading whitespace); the one that reads the most wins, the earlier in the catalog on a tie.
A weak reading is no stamp (a date quoted in one message; ids read as epoch seconds), so a
format is trusted only as `Tried.trusted` says. When the newest lines decide nothing (a long
traceback at the end), the whole tail is sampled once more. Pure."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from itertools import islice

from fleetcheck.parse.logformats.catalog import FORMATS, LogFormat
from fleetcheck.parse.logformats.fields import Stamp, stamp_from

SAMPLE_LINES = 16  # newest candidate lines tried first
WIDE_SAMPLE_LINES = 200  # tried when those decide nothing
TRUST_LINES = 3  # lines a format must read before it is trusted
EPOCH_NEAR_MTIME_S = 86400.0  # an epoch reading's newest line farther from the mtime: ids
EPOCH_BACKSTEP_S = 300.0  # how far an epoch line may fall behind the one before it

_CANDIDATE = re.compile(r"^\S.*\d")
_HEAD = 2  # a stamp starting within this many characters starts its line (`[`, `<`, `(`)


def _stamp_start(m: re.Match[str]) -> int:
    """Where the stamp itself starts: its own group's position, not the match's (a pattern
    that skips leading fields matches at 0 on every line)."""
    for group in ("ts", "e"):
        if group in m.re.groupindex and m.start(group) >= 0:
            return m.start(group)
    return m.start()


def _found(fmt: LogFormat, line: str) -> tuple[Stamp, int] | None:
    for m in fmt.pattern.finditer(line):
        stamp = stamp_from(fmt.name, m, line, fmt.date_known)
        if stamp is not None:
            return stamp, _stamp_start(m)
    return None


def _epoch_doubt(stamps: list[Stamp], mtime: float | None) -> str | None:
    """Why numbers read as epoch seconds are more likely ids, sizes or counters: they run
    backwards from one line to the next, or the newest is far from the file's mtime (a log
    is written when its lines are). `stamps` are newest line first. None: no doubt."""
    times = [s.wall.replace(tzinfo=UTC).timestamp() for s in stamps]
    for newer, older in zip(times, times[1:], strict=False):
        if older - newer > EPOCH_BACKSTEP_S:
            return "numbers run backwards, not times"
    if mtime is not None and abs(max(times) - mtime) > EPOCH_NEAR_MTIME_S:
        when = datetime.fromtimestamp(max(times), UTC)
        return f"as epoch the newest is {when:%Y-%m-%d}, far from the file's mtime: ids?"
    return None


def find_in(fmt: LogFormat, line: str) -> Stamp | None:
    """The first real time `fmt` reads in `line` (a match whose numbers are no date, such as
    month 13, is passed over), or None."""
    found = _found(fmt, line)
    return None if found is None else found[0]


@dataclass(frozen=True)
class Tried:
    fmt: LogFormat
    hits: int  # sample lines it read
    sample: int  # out of this many
    at_start: int = 0  # hits whose stamp starts the line
    doubt: str | None = None  # why its readings are not times after all (epoch readings)

    @property
    def trusted(self) -> bool:
        """A strong format reading every sampled line, or only line starts (record headers
        between message lines with digits of their own); else TRUST_LINES line starts or a
        third of the sample; epoch readings must run forward and end near the mtime."""
        if self.doubt is not None:
            return False
        if self.fmt.strong and self.hits == self.sample:
            return True
        if self.fmt.strong and self.at_start == self.hits:
            return True  # record headers of a specific shape: lines between are messages
        if self.hits < TRUST_LINES:
            return False
        return self.at_start == self.hits or self.hits * 3 >= self.sample


@dataclass(frozen=True)
class Detection:
    """The format a tail is read with (None: no format was trusted), how many lines decided
    it and what else was tried (best first, only formats that read a line)."""

    format: LogFormat | None
    sample: int
    tried: tuple[Tried, ...]

    @property
    def find(self) -> Callable[[str], Stamp | None]:
        return partial(find_in, self.format) if self.format else lambda line: None

    @property
    def hits(self) -> int:
        return next((t.hits for t in self.tried if t.fmt is self.format), 0)

    def evidence(self) -> dict[str, object]:
        """What the row's evidence says about the format: its name and how it was chosen."""
        out: dict[str, object] = {"sampled_lines": self.sample}
        if self.format is not None:
            out.update(name=self.format.name, title=self.format.title, read=self.hits)
            if self.format.quirks:
                out["quirks"] = list(self.format.quirks)
        runners_up = [f"{t.fmt.name} ({t.hits})" for t in self.tried if t.fmt is not self.format]
        if runners_up:
            out["also_read"] = runners_up[:3]
        return out


def _sample(lines: list[str], limit: int) -> list[str]:
    return list(islice(filter(_CANDIDATE.match, reversed(lines)), limit))


def _try(sample: list[str], mtime: float | None) -> list[Tried]:
    tried = []
    for fmt in FORMATS:
        hits = at_start = 0
        stamps: list[Stamp] = []
        for line in sample:
            found = _found(fmt, line)
            if found is not None:
                hits += 1
                at_start += found[1] <= _HEAD
                stamps.append(found[0])
        if hits:
            doubt = None
            if all(s.kind == "epoch" for s in stamps):
                doubt = _epoch_doubt(stamps, mtime)
            tried.append(Tried(fmt, hits, len(sample), at_start, doubt))
    tried.sort(key=lambda t: -t.hits)  # stable: the catalog's order on a tie
    return tried


def detect(lines: list[str], mtime: float | None = None) -> Detection:
    """The format of a tail's lines (see the module's docstring for the rule); `mtime`
    (epoch seconds), when known, lets an epoch reading be checked against the file."""
    sample = _sample(lines, SAMPLE_LINES)
    tried = _try(sample, mtime)
    if not any(t.trusted for t in tried) and len(lines) > len(sample):
        wide = _sample(lines, WIDE_SAMPLE_LINES)
        if len(wide) > len(sample):
            sample, tried = wide, _try(wide, mtime)
    chosen = next((t.fmt for t in tried if t.trusted), None)
    return Detection(chosen, len(sample), tuple(tried))
