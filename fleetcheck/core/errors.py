"""Exceptions shared across layers. A leaf: it imports nothing of ours but the model, so a
transport can raise what the runner turns into a row without importing the plugin contract."""

from __future__ import annotations

from fleetcheck.core.model import Status


class CheckError(Exception):
    """A probe could not measure. Becomes a row with `status` (UNKNOWN unless a check knows
    better, e.g. a changed SSH host key is CRIT) and this message as the one-line reason."""

    def __init__(
        self,
        reason: str,
        status: Status = Status.UNKNOWN,
        *,
        cause: str | None = None,
        strength: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        # the shared cause this failure names (a broker, a host key, a jump host), so rows it
        # breaks are grouped under it; the evidence strength of the row it becomes
        self.cause = cause
        self.strength = strength


class TransportError(CheckError):
    """The host could not be reached or would not run the command. The reason is the one
    line the operator sees for every SSH check of that host."""
