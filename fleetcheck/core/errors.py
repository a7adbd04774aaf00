"""Exceptions shared across layers. A leaf: it imports nothing of ours but the model, so a
transport can raise what the runner turns into a row without importing the plugin contract."""

from __future__ import annotations

from typing import Any

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
        evidence: Any = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        # the shared cause this failure names (a broker, a host key, a jump host), so rows it
        # breaks are grouped under it; the evidence strength of the row it becomes
        self.cause = cause
        self.strength = strength
        # the few facts the failure knows, for the row's evidence (e.g. that the host did not
        # answer at all, which the post-patrol correlation reads)
        self.evidence = evidence


# The evidence key of a row whose host did not answer at all (no route, no reply to the TCP
# connect): the post-patrol correlation (core.correlate) reads it as "this host is gone from
# the network", e.g. to call its remaining broker connections half-open
HOST_UNREACHABLE = "host_unreachable"


class TransportError(CheckError):
    """The host could not be reached or would not run the command. The reason is the one
    line the operator sees for every SSH check of that host."""


def host_unreachable(err: TransportError, how: str) -> TransportError:
    """`err` as a host that does not answer at all: CRIT (a machine gone from the network is an
    incident of the fleet, not a blind spot of fleetcheck), seen only from the patrol's machine
    (inference: the host may be up behind a cut path), marked for the correlation."""
    err.status = Status.CRIT
    err.strength = "inference"
    err.evidence = {HOST_UNREACHABLE: how}
    return err
