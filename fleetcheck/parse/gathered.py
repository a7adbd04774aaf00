"""What a host's gathered exec printed (fleetcheck.transport.gather's script), read back as
one Fragment per check fragment and the host's clock. Pure: bytes in, values out.

Hostile or broken output (a fragment printing thousands of marker-like lines, a begin that
never ends, output cut at the byte bound) costs one linear pass and yields what can be
trusted, never a crash; tests/test_fuzz.py and tests/test_framing.py hold it to that."""

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


def parse_gathered(nonce: str, out: bytes) -> tuple[dict[str, Fragment], float | None]:
    """The fragments by key, and the host's clock (epoch seconds) when the script started,
    None when it did not print a readable one."""
    n = re.escape(nonce.encode())
    remote_epoch = None
    m = re.search(rb"@@" + n + rb" clock (\S+)", out)
    if m:
        try:
            remote_epoch = float(m.group(1).decode().rstrip("N").rstrip("."))
        except ValueError:
            remote_epoch = None
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
