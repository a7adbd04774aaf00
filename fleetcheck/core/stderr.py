"""The one way fleetcheck writes a warning or an error line on stderr: through
`core.safe_text.one_line`, once here (a warning carries text remote parties control as often
as a row does, and stderr is cron mail and the operator's terminal). Import-light.
"""

from __future__ import annotations

import sys
from typing import TextIO

from fleetcheck.core.safe_text import one_line

PREFIX = "fleetcheck"


def say(message: str, stream: TextIO | None = None) -> None:
    """`message` as one safe line on stderr (or `stream`), flushed: for lines that have their
    own prefix (`fleetcheck: interrupted`, a config report's warning lines)."""
    out = stream if stream is not None else sys.stderr
    print(one_line(message), file=out, flush=True)


def warn(message: str, stream: TextIO | None = None) -> None:
    """`fleetcheck: warning: MESSAGE` on stderr, MESSAGE made safe (see the module doc)."""
    say(f"{PREFIX}: warning: {message}", stream)


def error(message: str, stream: TextIO | None = None) -> None:
    """`fleetcheck: error: MESSAGE` on stderr, MESSAGE made safe (see the module doc)."""
    say(f"{PREFIX}: error: {message}", stream)
