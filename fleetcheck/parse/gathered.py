"""What a host's gathered exec printed (fleetcheck.transport.gather's script), read back as
one Fragment per check fragment and the host's clock. Pure: bytes in, values out.

Hostile or broken output (thousands of marker-like lines, a begin that never ends, output
cut at the byte bound) costs one linear pass and yields what can be trusted, never a crash."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Fragment:
    """The output of one check's shell fragment from the host's gathered exec."""

    rc: int
    output: bytes

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")


MAX_EPOCH = 253402300799.0  # 9999-12-31T23:59:59Z: the last second a datetime can hold


def epoch_problem(seconds: float) -> str | None:
    """Why epoch seconds a host printed (stat's mtime, date's clock) cannot be a time (None
    when they can): `nan`, `inf`, before 1970 or past the year 9999 make every age computed
    from them fail or mean nothing. That is bad host data, not a fleetcheck bug."""
    if seconds != seconds:
        return "not a number"
    if seconds in (float("inf"), float("-inf")):
        return "infinite"
    if seconds < 0:
        return "before 1970"
    if seconds > MAX_EPOCH:
        return "after the year 9999"
    return None


def parse_clock(nonce: str, out: bytes) -> tuple[float | None, str | None]:
    """The host's clock (epoch seconds) when the script started, None when it printed none
    that can be read; and, when what it printed is a number but no time (`nan`, `inf`,
    negative, huge), the row's reason: "host reported an unusable time: ..."."""
    m = re.search(rb"@@" + re.escape(nonce.encode()) + rb" clock (\S+)", out)
    if not m:
        return None, None
    text = m.group(1).decode("utf-8", "replace")
    try:
        seconds = float(text.rstrip("N").rstrip("."))
    except ValueError:
        return None, None
    problem = epoch_problem(seconds)
    if problem is not None:
        return None, f"host reported an unusable time: {problem} (its clock read {text[:40]!r})"
    return seconds, None


def parse_gathered(nonce: str, out: bytes) -> tuple[dict[str, Fragment], float | None]:
    """The fragments by key, and the host's clock (epoch seconds) when the script started,
    None when it did not print a readable one."""
    n = re.escape(nonce.encode())
    remote_epoch, _ = parse_clock(nonce, out)
    # One pass over the marker lines (linear in the output, also when a hostile fragment
    # prints thousands of begin markers): a fragment is the text between `begin KEY` and
    # the next `\n...end KEY RC` of the same key; a begin that never ends is ignored.
    fragments: dict[str, Fragment] = {}
    marker = re.compile(rb"@@" + n + rb" (begin|end) (\S+)(?: (\d+))?\n")
    pending: dict[bytes, int] = {}
    for m in marker.finditer(out):
        key = m.group(2)
        if m.group(1) == b"begin":
            if m.group(3) is None:
                pending.setdefault(key, m.end())
            continue
        start = pending.get(key)
        if start is None or m.group(3) is None:
            continue
        if m.start() - 1 < start or out[m.start() - 1 : m.start()] != b"\n":
            continue
        fragments[key.decode("utf-8", "replace")] = Fragment(
            rc=int(m.group(3)), output=out[start : m.start() - 1]
        )
        pending.clear()
    return fragments, remote_epoch
