"""After the patrol: verdicts that no row can reach alone, from the rows of the whole patrol.

A host that does not answer SSH at all (its SSH rows carry HOST_UNREACHABLE) while the broker
still lists connections from its address: those are most likely half-open, left by a machine
that vanished without closing them (no FIN: the broker keeps them until its keepalive gives
up). The broker check's row alone would call them healthy. A check declares the rules over
its rows (`Check.correlations`). Pure, called once by the runner after every row is in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from fleetcheck.core.declarations import HalfOpen
from fleetcheck.core.model import Result, Status, Strength


def half_open(check: str, rule: HalfOpen, results: Sequence[Result]) -> list[Result]:
    """`results` after `rule`, declared by `check` (see HalfOpen): a host that did not answer
    at all, yet whose `check` row counts connections, has that OK row made `rule.status`."""
    gone: dict[str, Result] = {}
    for r in results:
        if r.host is not None and r.host not in gone and _marked(r, rule.marker):
            gone[r.host] = r
    out = []
    for r in results:
        witness = gone.get(r.host) if r.host is not None else None
        n = r.metrics.get(rule.count)
        if (
            witness is None
            or r.check != check
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
            "how": witness.evidence.get(rule.marker),
        }
        plural = "s" if n != 1 else ""
        out.append(
            replace(
                r,
                status=rule.status,
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


def correlate(
    results: Iterable[Result], rules: Sequence[tuple[str, HalfOpen]] | None = None
) -> tuple[Result, ...]:
    """The patrol's rows after every rule, in their order (a row no rule touches is the same
    object). `rules`: (check, rule) pairs; None: what the checks of these rows declare
    (`Check.correlations`, through the registry)."""
    rows = list(results)
    if rules is None:
        from fleetcheck.core import registry

        rules = registry.declared("correlations", (r.check for r in rows))
    for check, rule in rules:
        rows = half_open(check, rule, rows)
    return tuple(rows)
