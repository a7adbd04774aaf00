"""After the patrol: verdicts that no row can reach alone, from the rows of the whole patrol.

Each row is judged on its own facts; some facts only mean something beside another row's. A
host that does not answer SSH at all (no route, no reply to the TCP connect: its SSH rows
carry HOST_UNREACHABLE in their evidence) while the broker still lists connections from its
address: those connections are most likely half-open, left by a machine that vanished
without closing them (a terminated VM, a cut cable: no FIN, so the broker keeps them until
its own keepalive gives up, by default minutes). The `clients` row alone would call them
healthy.

Pure: rows in, rows out, no I/O, called once by the runner after every row is in. Generic:
a rule names the checks and metrics it reads as data, so this module imports no check.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fleetcheck.core.errors import HOST_UNREACHABLE
from fleetcheck.core.model import Result, Status, Strength


@dataclass(frozen=True)
class HalfOpen:
    """A host that did not answer at all, yet whose `count` metric on its `check` row shows
    connections: that OK row becomes `status`, "likely half-open", with the cause of the
    host's unreachability (so the outputs show it as one problem with its SSH rows).

    WARN, not CRIT: the host's own SSH rows already carry the failure (CRIT, a host gone from
    the network); this row adds what it means for the broker, and that is inferred (a path
    cut between this machine and the host alone would leave live connections looking the
    same). It must only stop being called healthy."""

    check: str
    count: str
    marker: str = HOST_UNREACHABLE
    status: Status = Status.WARN

    def apply(self, results: Sequence[Result]) -> list[Result]:
        gone: dict[str, Result] = {}
        for r in results:
            if r.host is not None and r.host not in gone and _marked(r, self.marker):
                gone[r.host] = r
        out = []
        for r in results:
            witness = gone.get(r.host) if r.host is not None else None
            n = r.metrics.get(self.count)
            if (
                witness is None
                or r.check != self.check
                or r.status is not Status.OK
                or isinstance(n, bool)
                or not isinstance(n, int)
                or n <= 0
            ):
                out.append(r)
                continue
            evidence: dict[str, Any] = dict(r.evidence) if isinstance(r.evidence, dict) else {}
            if r.evidence is not None and not isinstance(r.evidence, dict):
                evidence["seen"] = r.evidence
            evidence["half_open"] = {
                "ssh_check": witness.check,
                "ssh": witness.summary,
                "how": witness.evidence.get(self.marker),
            }
            plural = "s" if n != 1 else ""
            out.append(
                replace(
                    r,
                    status=self.status,
                    summary=(
                        f"{n} broker connection{plural} but the host does not answer SSH: "
                        "likely half-open (a machine gone without closing them)"
                    ),
                    evidence=evidence,
                    evidence_strength=Strength.INFERENCE.value,
                    cause=witness.cause or r.cause,
                )
            )
        return out


def _marked(r: Result, marker: str) -> bool:
    return isinstance(r.evidence, dict) and marker in r.evidence


# The rules a patrol runs: check and metric names are data (the runner imports no check)
RULES: tuple[HalfOpen, ...] = (HalfOpen(check="clients", count="connections"),)


def correlate(results: Iterable[Result], rules: Sequence[HalfOpen] = RULES) -> tuple[Result, ...]:
    """The patrol's rows after every rule, in their order (a row no rule touches is the same
    object)."""
    rows = list(results)
    for rule in rules:
        rows = rule.apply(rows)
    return tuple(rows)
