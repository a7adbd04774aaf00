"""What every host transport offers: run one command with a hard deadline and a byte bound."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from fleetcheck.check import CheckError
from fleetcheck.model import Status


@dataclass(frozen=True)
class ExecResult:
    rc: int | None  # None when the command was cut off (deadline) before it exited
    stdout: bytes
    stderr: bytes
    truncated: bool  # output went past the byte bound and the rest was discarded
    duration_s: float


class TransportError(CheckError):
    """The host could not be reached or would not run the command. The reason is the one
    line the operator sees for every SSH check of that host."""

    def __init__(self, reason: str, status: Status = Status.UNKNOWN) -> None:
        super().__init__(reason, status)


class Shell(Protocol):
    def run(self, command: str, timeout: float, max_bytes: int) -> ExecResult:
        """Run `command` (POSIX sh). Raises TransportError when it cannot be run at all;
        a command still running at `timeout` is killed and returns rc=None."""
        ...

    def close(self) -> None: ...
