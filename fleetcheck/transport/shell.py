"""What every host transport offers: run one command with a hard deadline and a byte bound."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ExecResult:
    rc: int | None  # None when the command was cut off (deadline) before it exited
    stdout: bytes
    stderr: bytes
    truncated: bool  # output went past the byte bound and the rest was discarded
    duration_s: float


class Shell(Protocol):
    def run(self, command: str, timeout: float, max_bytes: int) -> ExecResult:
        """Run `command` (POSIX sh). Raises TransportError when it cannot be run at all;
        a command still running at `timeout` is killed and returns rc=None."""
        ...

    def close(self) -> None: ...
