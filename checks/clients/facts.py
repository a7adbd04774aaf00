"""clients's facts: what one CLIENT LIST (and the previous round's memory) says of each host,
and the small helpers its judging shares (the check is in `.check`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fleetcheck.checks.clients import ClientsConfig

from fleetcheck.core.hostfacts import ClientsHostConfig
from fleetcheck.core.model import STRENGTHS, Status
from fleetcheck.parse.clientlist import ClientTable

Group = tuple[str, str, str]  # (host, name, cmd)

QUIET_SAMPLES = 20  # quiet times of the host's recent rounds kept as its baseline
QUIET_FACTOR = 3  # silent: quieter than this many times the longest quiet it showed
PATTERN_ROUNDS = 10  # rounds of counts per client-name pattern kept
NAMES_KEPT = 50  # client names (with their counts) kept from the last round at strength
AGE_SLACK_S = 1.0  # ages are whole seconds: a connection this much younger is surely new
# churn is judged from this many short-lived connections between two rounds: fewer is a
# handful of one-off clients (fleetcheck's own connections of the previous round, a script)
# whose rate says nothing when two rounds run a second apart; at a patrol's interval any rate
# past max_churn is thousands
CHURN_MIN_SHORT_LIVED = 30


@dataclass(frozen=True)
class ClientsFacts:
    """Counts, not clients: 10,000 connections are a few distinct (host, name, cmd)."""

    groups: Mapping[Group, int]  # clients by (host, name, cmd); a host row: its own only
    claimed: frozenset[str]  # every address some host claims
    max_idle: Mapping[str, int] = field(default_factory=dict)  # longest idle_s per host
    strays: tuple[tuple[str, str, str], ...] = ()  # broker row: (addr, name, cmd), first 20
    min_idle: Mapping[str, int] = field(default_factory=dict)  # shortest idle_s per host
    waiting: Mapping[str, int] = field(default_factory=dict)  # blocked or subscribed, per host
    ages: Mapping[int, int] = field(default_factory=dict)  # clients by age (s)
    young: Mapping[str, int] = field(default_factory=dict)  # broker row: age <= 1s, per host
    previous: Mapping[str, Any] | None = None  # what this row's previous round carried
    queued: int | None = None  # jobs in the fleet's queues (read when silent)
    received: int | None = None  # broker row: INFO total_connections_received
    run_id: str | None = None  # broker row: INFO run_id (a restart resets the counter)


def facts_of(
    table: ClientTable,
    claimed: frozenset[str],
    mine: Collection[str] | None = None,
    ignore_names: Collection[str] = (),
    previous: Mapping[str, Any] | None = None,
    received: int | None = None,
    run_id: str | None = None,
) -> ClientsFacts:
    """A host row's facts (`mine`: its normalised addresses) or the broker row's (None);
    `previous` is what the row's previous round carried, `received` and `run_id` INFO's."""
    idle = table.max_idle()
    quiet = table.min_idle()
    if mine is not None:
        own: dict[Group, int] = {}
        every: dict[int, int] = {}
        waiting: dict[str, int] = {}
        for h in mine:
            own.update(table.groups_of(h))
            host_ages, host_waiting = table.behaviour_of(h)
            for age, n in host_ages.items():
                every[age] = every.get(age, 0) + n
            if host_waiting:
                waiting[h] = host_waiting
        return ClientsFacts(
            own,
            claimed,
            {h: idle[h] for h in mine if h in idle},
            min_idle={h: quiet[h] for h in mine if h in quiet},
            waiting=waiting,
            ages=every,
            previous=previous,
        )
    strays = table.select(lambda h, name: h not in claimed and name not in ignore_names, 20)
    # per host, the clients at most a second old
    young = {h: n for h, a in table.ages().items() if (n := a.get(0, 0) + a.get(1, 0))}
    return ClientsFacts(
        table.groups(),
        claimed,
        idle,
        tuple(strays),
        min_idle=quiet,
        waiting={h: n for h, n in table.waiting().items() if n},
        ages=table.all_ages(),
        young=young,
        previous=previous,
        received=received,
        run_id=run_id,
    )


# ---------------------------------------------------------------- memory (pure)
def num(value: Any) -> float | None:
    """A number from the state file, or None (it is a file: anything may be in it)."""
    if type(value) in _NUMBER and value == value and -1e15 < value < 1e15:
        return float(value)
    return None


def nums(value: Any, keep: int) -> list[float]:
    """The last `keep` numbers of a list from the state file (anything else dropped)."""
    if type(value) is not list:
        return []
    return [float(x) for x in value[-keep:] if num(x) is not None]


_NUMBER = (int, float)  # exactly: a bool from the file is no number


def limit_of(
    own: ClientsHostConfig, config: ClientsConfig, quiet: list[float]
) -> tuple[float | None, float | None]:
    """(the silence limit in seconds or None when off, the baseline it was learned from or
    None): the host's own `silent_after` when set; else QUIET_FACTOR times the longest
    quiet its recent healthy rounds showed (`quiet`, read from the carry), at least the
    check's `silent_after` (which is also the limit before there is a baseline)."""
    if own.silent_after is not None:
        return (own.silent_after or None), None
    if not quiet:
        return config.silent_after, None
    base = max(quiet)
    return max(config.silent_after, QUIET_FACTOR * base), base


def utc_text(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S UTC")


def utc_iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def named_counts(counts: Mapping[str, float], limit: int = 5) -> str:
    items = list(counts.items())
    shown = ", ".join(f"{k} ({int(n)})" for k, n in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


@dataclass
class Row:
    """What one host row is built from: its findings (status, text, strength), notes for an
    OK row, its evidence and what it carries to the next round."""

    evidence: dict[str, Any]
    carry: dict[str, Any]
    facts: ClientsFacts
    config: ClientsConfig
    findings: list[tuple[Status, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, status: Status, text: str, strength: str) -> None:
        self.findings.append((status, text, strength))

    def status(self) -> Status:
        return max((f[0] for f in self.findings), key=lambda s: s.rank, default=Status.OK)

    def strength(self) -> str | None:
        """The strongest evidence among the findings of the row's status."""
        status = self.status()
        grades = [f[2] for f in self.findings if f[0] is status and status is not Status.OK]
        return min(grades, key=STRENGTHS.index, default=None)
