"""clients's check: the probe, its facts and their judging (the settings are the package's,
fleetcheck.checks.clients)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from statistics import median
from typing import TYPE_CHECKING, Any

from fleetcheck.checks.clients import ClientsConfig

from fleetcheck.config import FleetConfig, HostConfig
from fleetcheck.core.check import Check, Commands, Key, cmd
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.declarations import Cause, ChartSpec, Clue, HalfOpen, PeerMetric
from fleetcheck.core.hostfacts import ClientsHostConfig, addrs_of, claimed_addrs, fleet_queues
from fleetcheck.core.judge import exceeds
from fleetcheck.core.model import Result, Status
from fleetcheck.parse.clientlist import name_pattern, normalise_ip
from fleetcheck.parse.duration import format_duration

if TYPE_CHECKING:  # the demo's lab, for demo_fault's type only (never imported at run time)
    from fleetcheck.core.discovery import Draft, Sample
    from fleetcheck.lab.demo import DemoFleet


from fleetcheck.checks.clients.facts import (
    AGE_SLACK_S,
    CHURN_MIN_SHORT_LIVED,
    NAMES_KEPT,
    PATTERN_ROUNDS,
    QUIET_SAMPLES,
    ClientsFacts,
    Row,
    facts_of,
    limit_of,
    named_counts,
    num,
    nums,
    utc_iso,
    utc_text,
)


class ClientsCheck(Check[ClientsConfig, ClientsFacts]):
    name = "clients"
    description = "per-host presence in the broker's CLIENT LIST (connections per address)"
    host_config_type = ClientsHostConfig
    headline = ("connections", "clients")  # a host row's, the broker-wide row's
    clues = (
        Clue("broker connections gone: {summary}", "connections", None, 0),
        Clue("connections made anew (reconnected) at {at}", at_key="reconnected_at",
             any_status=True),
    )  # fmt: skip
    causes = (
        Cause(
            "its workers stopped or cannot reach the broker",
            "whether its worker processes run, and whether the broker answers from the host",
            "connections",
            None,
            0,
            statuses=("CRIT", "WARN"),
            upstream=20,
        ),
    )
    peer_metrics = (PeerMetric("connections", "broker connections", "both", 2, 0.4),)
    # a host gone from the network while the broker still lists its connections
    correlations = (HalfOpen(count="connections"),)
    charts = (
        ChartSpec(
            "connections",
            "Broker connections per host",
            "a host's line at zero: its workers are gone although the queue still drains",
            per_host="connections",
            pick="fewest",
            picked="fewest connections",
            place=30,
        ),
    )
    example = """\
[checks.clients]
max_unknown = 0                  # clients from addresses no host claims: WARN past this many
ignore_names = ["fleetcheck"]    # client names never counted as unknown
silent_after = "30s"             # least silence limit once a round is seen (then learned)
flap_count = 3                   # a host reconnecting this many times ...
flap_window = "1h"               # ... within this long is flapping: WARN
max_churn = 10                   # broker-wide: WARN past this many short-lived connections/s
"""
    host_example = """\
addrs = ["192.168.1.20", "192.168.1.21"]     # its addresses in CLIENT LIST (WSL2 NAT can add one)
min_clients = 10                             # fewer broker connections: WARN; none: CRIT
# silent_after = "2m"                        # its own silence limit (unset: learned; 0: off)
"""
    demo_meaning = (
        "no broker connection from this machine: its workers are gone or cut off, while "
        "queue depth and throughput still look fine because the others absorb the work (incident 4)"
    )

    def broker_commands(self, fleet: FleetConfig, config: ClientsConfig) -> Commands:
        return (
            cmd("CLIENT", "ID"),
            cmd("CLIENT", "LIST"),
            cmd("INFO"),
            *(cmd("LLEN", Key(q)) for q in fleet_queues(fleet)),
        )

    def discover_draft(self, sample: Sample) -> Draft | None:
        from fleetcheck.core.discovery import Draft

        return Draft(("[checks.clients]",))

    def demo_fault(self, fleet: DemoFleet) -> str | None:
        """Workers on n8 (polling every second), laptop (waiting in BLPOP on a list no one
        writes) and broker (an idle pool); mini has none: the silently dead machine."""
        from fleetcheck.lab.behaviours import start_blocking, start_chatty

        start_chatty(fleet.lab, fleet.hosts["n8"], 12, "worker-n8")
        start_blocking(fleet.lab, fleet.hosts["laptop"], 4, "worker-laptop", "demo:idle")
        fleet.lab.start_workers(fleet.hosts["broker"], 2, "worker-broker")
        fleet.host_keys("n8", "min_clients = 10")
        return ""

    def demo_explain(self, result: Result) -> str | None:
        if result.host is None and result.status is not Status.OK:
            return "broker clients from addresses no host claims: an unknown machine or tool"
        return super().demo_explain(result)

    def targets(self, fleet: FleetConfig, config: ClientsConfig) -> list[HostConfig | None]:
        return [None, *(h for h in fleet.hosts if expects_clients(h))]

    def why_no_row(self, host: HostConfig, config: ClientsConfig) -> str | None:
        """Why `host` gets no row (None: it gets one), for `config check`'s listing."""
        why = "no addrs and no min_clients written: no broker connections expected"
        return None if expects_clients(host) else why

    def probe_all(
        self, ctx: PatrolContext, targets: Sequence[HostConfig | None], config: ClientsConfig
    ) -> dict[str | None, ClientsFacts]:
        """Every row from one CLIENT LIST; the fleet's queues (one LLEN round trip), which
        a silent host's row weighs."""
        table = ctx.client_table()
        claimed = claimed_addrs(ctx.fleet)
        queued = _queued(ctx)
        out: dict[str | None, ClientsFacts] = {}
        for host in targets:
            previous = ctx.carried(self.name, host)
            if host is None:
                received, run_id = _connections_received(ctx)
                out[None] = facts_of(
                    table, claimed, None, config.ignore_names, previous, received, run_id
                )
            else:
                mine = {normalise_ip(a) for a in addrs_of(host)}
                facts = facts_of(table, claimed, mine, config.ignore_names, previous)
                out[host.name] = replace(facts, queued=queued)
        return out

    def evaluate(
        self, facts: ClientsFacts, config: ClientsConfig, host: HostConfig | None, now: datetime
    ) -> Result:
        if host is None:
            return self._broker_row(facts, config, now)
        own = host.settings(ClientsHostConfig)
        if not own.addrs:
            return self.result(
                host,
                Status.UNKNOWN,
                f"min_clients {own.min_clients} but no addrs configured, so its broker "
                "connections cannot be told apart (add the addresses it connects from, or "
                "min_clients = 0 for a host with no broker connections)",
            )
        at = now.timestamp()
        previous = facts.previous or {}
        mine = {normalise_ip(a) for a in own.addrs}
        groups = [(k, n) for k, n in facts.groups.items() if k[0] in mine]
        counts: dict[str, int] = {}
        names: dict[str, int] = {}
        for (addr, name, _cmd), n in groups:
            counts[addr] = counts.get(addr, 0) + n
            names[name] = names.get(name, 0) + n
        by_addr = {normalise_ip(a): counts.get(normalise_ip(a), 0) for a in own.addrs}
        total = sum(by_addr.values())
        metrics: dict[str, Any] = {"connections": total, "by_addr": by_addr}
        idle = [s for h, s in facts.max_idle.items() if h in mine]
        quiet = [s for h, s in facts.min_idle.items() if h in mine]
        waiting = sum(n for h, n in facts.waiting.items() if h in mine)
        evidence: dict[str, Any] = {
            "names": sorted({k[1] for k, _ in groups if k[1]}),
            "max_idle_s": max(idle) if idle else None,
            "commands": sorted({k[2] for k, _ in groups if k[2]}),
        }
        spread = ", ".join(f"{a}: {n}" for a, n in by_addr.items())
        carry: dict[str, Any] = {"at": at, "n": total}
        row = Row(evidence, carry, facts, config)
        missing = _missing_names(previous, names)
        gone = f"; missing: {missing}" if missing else ""
        if total == 0:
            summary = f"no broker connections from {', '.join(by_addr)}"
            if own.min_clients > 0:
                row.add(Status.CRIT, summary + gone, "proof")
        elif total < own.min_clients:
            summary = (
                f"{total} broker connection{'s' if total != 1 else ''}, "
                f"fewer than min_clients {own.min_clients} ({spread})"
            )
            row.add(Status.WARN, summary + gone, "proof")
        else:
            summary = f"{total} broker connection{'s' if total != 1 else ''} ({spread})"
        if missing:
            evidence["missing"] = missing
        kept = names if total >= max(own.min_clients, 1) else previous.get("names")
        carry["names"] = _top_names(kept)

        if total:
            if quiet:
                metrics["quiet_s"] = min(quiet)
            metrics["waiting"] = waiting
            _silence(row, own, quiet, waiting, total)
            _patterns(row, names)
        _reconnects(row, total, at)

        status = row.status()
        # the summary first unless the worst finding tells it; what changed since the last
        # round (the notes) after, also beside a finding
        texts = [f[1] for f in sorted(row.findings, key=lambda f: -f[0].rank)]
        if status is Status.OK or not texts[0].startswith(summary):
            texts = [summary, *[t for t in texts if t != summary]]
        texts += row.notes
        limits: dict[str, Any] = {"min_clients": own.min_clients}
        if "silence_limit_s" in evidence:
            limits["silent_after_s"] = evidence.pop("silence_limit_s")
        return self.result(
            host,
            status,
            "; ".join(texts),
            metrics=metrics,
            evidence=evidence,
            limits=limits,
            carry=carry,
            evidence_strength=row.strength(),
        )

    def _broker_row(self, facts: ClientsFacts, config: ClientsConfig, now: datetime) -> Result:
        result = self._unknown_clients(facts, config)
        at = now.timestamp()
        carry: dict[str, Any] = {"at": at, "received": facts.received, "run_id": facts.run_id}
        churn = _churn(facts, at)
        if churn is None:
            return replace(result, carry=carry)
        rate, short_rate, seconds, new, short = churn
        metrics = {
            **result.metrics,
            "new_connections_per_s": round(rate, 3),
            "short_lived_per_s": round(short_rate, 3),
        }
        clients = result.metrics["clients"]
        limits = {"max_churn": config.max_churn}
        if not config.max_churn or short_rate <= config.max_churn or short < CHURN_MIN_SHORT_LIVED:
            return replace(result, metrics=metrics, limits=limits, carry=carry)
        youngest = dict(sorted(facts.young.items(), key=lambda kv: -kv[1])[:5])
        text = (
            f"connection churn: {rate:.1f} new connections/s over the last "
            f"{format_duration(seconds)} ({new} new, {short} already closed again) "
            f"against {clients} clients connected"
            + (f"; youngest from {named_counts(youngest)}" if youngest else "")
            + f" (max_churn {config.max_churn:g}/s)"
        )
        evidence = {"churn": {"new": new, "short_lived": short, "youngest_by_addr": youngest}}
        if result.evidence:
            evidence["strays"] = result.evidence
        summary = text if result.status is Status.OK else f"{result.summary}; {text}"
        return self.result(
            None,
            Status.WARN,
            summary,
            metrics=metrics,
            evidence=evidence,
            limits=limits,
            carry=carry,
            evidence_strength="behaviour" if result.status is Status.OK else None,
        )

    def _unknown_clients(self, facts: ClientsFacts, config: ClientsConfig) -> Result:
        counts: Counter[str] = Counter()
        for (addr, name, _cmd), n in facts.groups.items():
            if addr not in facts.claimed and name not in config.ignore_names:
                counts[addr] += n
        unknown = sum(counts.values())
        clients = sum(facts.groups.values())
        listed = ", ".join(f"{a} ({n})" for a, n in counts.most_common(10))
        metrics = {"clients": clients, "unknown_clients": unknown, "unknown_by_addr": dict(counts)}
        evidence = [{"addr": a, "name": n, "cmd": c} for a, n, c in facts.strays[:20]]
        if exceeds(unknown, config.max_unknown):
            summary = f"{unknown} broker clients from addresses no host claims: {listed}"
            return self.result(None, Status.WARN, summary, metrics=metrics, evidence=evidence)
        tail = f"; unclaimed: {listed}" if unknown else ""
        summary = f"{clients} broker clients, {unknown} from unclaimed addresses{tail}"
        return self.result(None, Status.OK, summary, metrics=metrics, evidence=evidence)


def _silence(row: Row, own: ClientsHostConfig, quiet: list[int], waiting: int, total: int) -> None:
    """Connected but silent: every connection idle past the host's limit and none
    waiting for work (blocked in a pop or subscribed waits: healthy at any idle)."""
    facts = row.facts
    samples = nums((facts.previous or {}).get("quiet"), QUIET_SAMPLES)
    limit, base = limit_of(own, row.config, samples)
    if limit is not None:
        row.evidence["silence_limit_s"] = limit
    silence = min(quiet) if quiet else None
    if own.silent_after is None and not samples:
        # the first sighting teaches, it does not judge: a pool idle by design (web nodes
        # at night) seen for the first time is its own baseline, never a first-run alarm;
        # a host that spoke in its first round and froze after is still seen one round on
        limit = None
    silent = limit is not None and silence is not None and silence > limit and waiting == 0
    if silent and silence is not None and limit is not None:
        usual = (
            f"usually at most {format_duration(base)}, limit {format_duration(limit)}"
            if base is not None
            else f"limit {format_duration(limit)}"
        )
        text = (
            f"silent: none of its {total} connection{'s' if total != 1 else ''} has sent "
            f"a command for {format_duration(silence)} and none waits in a pop or a "
            f"subscription ({usual})"
        )
        if facts.queued:
            row.add(
                Status.CRIT,
                text + f", while {facts.queued} jobs wait in the queues",
                "behaviour",
            )
            row.evidence["queued"] = facts.queued
        else:
            row.add(Status.WARN, text, "behaviour")
    elif silence is not None and waiting == 0:
        samples.append(float(silence))  # a healthy round teaches the baseline
    row.carry["quiet"] = samples if len(samples) <= QUIET_SAMPLES else samples[-QUIET_SAMPLES:]


def _patterns(row: Row, names: Mapping[str, int]) -> None:
    """Counts per client-name pattern against the host's own recent rounds: half or
    more of a kind gone is a note the first round and WARN when the next round still
    shows it (a rolling deploy caught half way is one round)."""
    previous = row.facts.previous or {}
    now: dict[str, int] = {}
    for name, n in names.items():
        pattern = name_pattern(name)
        now[pattern] = now.get(pattern, 0) + n
    raw = previous.get("patterns")
    history = raw if isinstance(raw, dict) else {}
    raw_low = previous.get("low")
    low_before = {p for p in raw_low if isinstance(p, str)} if type(raw_low) is list else ()
    low: list[str] = []
    kept: dict[str, list[float]] = {}
    lost: dict[str, str] = {}
    for pattern in [*history, *(p for p in now if p not in history)]:
        counts = nums(history.get(pattern), PATTERN_ROUNDS) if isinstance(pattern, str) else []
        n = now.get(pattern, 0)
        # the median is at most the largest count: more than half of that is no loss
        if len(counts) >= 2 and 2 * n <= max(counts):
            usual = median(counts)
            if usual >= 2 and n <= usual / 2:
                low.append(pattern)
                text = f"{pattern}: {n} connection{'s' if n != 1 else ''}, usually {usual:g}"
                lost[pattern] = text
                if pattern in low_before:
                    row.add(Status.WARN, text + " (for two rounds)", "behaviour")
                else:
                    row.notes.append(text)
        counts = (counts + [float(n)])[-PATTERN_ROUNDS:]
        if any(counts):
            kept[str(pattern)] = counts
    if lost:
        row.evidence["patterns"] = dict(now)
        row.evidence["patterns_low"] = lost
    row.carry["patterns"] = (
        kept if len(kept) <= NAMES_KEPT else dict(list(kept.items())[:NAMES_KEPT])
    )
    row.carry["low"] = low


def _reconnects(row: Row, total: int, at: float) -> None:
    """Reconnected: half or more of the previous round's connections replaced by
    connections made since (a restart or a network drop between patrols), with when;
    a note once, WARN when it recurs flap_count times within flap_window."""
    facts, config = row.facts, row.config
    previous = facts.previous or {}
    earlier = previous.get("reconnects")
    window = config.flap_window
    events = [t for t in nums(earlier, 50) if at - t <= window] if earlier else []
    before_at, before_n = num(previous.get("at")), num(previous.get("n"))
    interval = at - before_at if before_at is not None else None
    event = None
    # no connection young enough to be new (most rounds): nothing replaced
    if facts.ages and interval is not None and interval > 0 and before_n and total:
        limit = interval - AGE_SLACK_S
        young = sorted([a for a in facts.ages if a < limit])
        new = sum(map(facts.ages.__getitem__, young))
        closed = max(before_n - (total - new), 0)
        replaced = min(new, closed)
        if replaced >= 1 and 2 * replaced >= before_n:
            first, last = at - young[-1], at - young[0]
            event = (first, last, new)
            events.append(at)
    row.carry["reconnects"] = events
    if event is not None:
        first, last, new = event
        # each time formatted once (a fleet-wide restart: every row reports one)
        since, until, first_iso = utc_text(first), utc_text(last), utc_iso(first)
        when = since if since == until else f"{since}-{until}"
        row.evidence["reconnected"] = {
            "first_s": first_iso,
            "last_s": utc_iso(last),
            "new": new,
        }
        row.evidence["reconnected_at"] = first_iso  # what `fleetcheck explain` times
        row.notes.append(
            f"reconnected at {when} ({new} of {total} connections new since the previous "
            "round: a restart or a network drop)"
        )
    if len(events) >= config.flap_count:
        times = ", ".join(utc_text(t) for t in events[-config.flap_count :])
        row.evidence["reconnects"] = [utc_iso(t) for t in events]
        row.add(
            Status.WARN,
            f"flapping: reconnected {len(events)} times within "
            f"{format_duration(config.flap_window)} (rounds at {times})",
            "behaviour",
        )


def expects_clients(host: HostConfig) -> bool:
    """Whether a host has broker expectations: addresses to count, or a min_clients that
    someone wrote (in its table, a group or [defaults]). A host with neither (a bastion, a
    machine that runs no workers) gets no row rather than an UNKNOWN it can never lose."""
    own = host.settings(ClientsHostConfig)
    return bool(own.addrs) or (own.min_clients > 0 and "min_clients" in host.sources)


def _connections_received(ctx: PatrolContext) -> tuple[int | None, str | None]:
    """INFO's total_connections_received and run_id (INFO is read once per patrol and shared
    with the broker check); (None, None) when INFO cannot be read: no churn this round."""
    from fleetcheck.core.errors import CheckError

    try:
        info = ctx.info()
    except CheckError:
        return None, None
    try:
        received = int(info["total_connections_received"])
    except (KeyError, TypeError, ValueError):
        received = None
    run_id = info.get("run_id")
    return received, run_id if isinstance(run_id, str) else None


def _queued(ctx: PatrolContext) -> int | None:
    """Jobs in the fleet's queues (fleetcheck.core.hostfacts.fleet_queues), in one pipelined
    LLEN round trip; None when there are none or they cannot be read (the silence is judged
    without them)."""
    keys = fleet_queues(ctx.fleet)
    if not keys:
        return None
    try:
        pipe = ctx.broker().pipeline(transaction=False)
        for key in keys:
            pipe.llen(key)
        lengths = pipe.execute(raise_on_error=False)
    except Exception:
        return None
    return sum(n for n in lengths if isinstance(n, int)) or None


def _missing_names(previous: Mapping[str, Any], now: Mapping[str, int]) -> str:
    """Client names the host's last round at strength had more of than this one: `w-3`, or
    `worker-n8 (6 of 12)` when several connections share a name."""
    raw = previous.get("names")
    if not isinstance(raw, dict) or raw == now:  # equal: the same names, none fewer
        return ""
    out = []
    for name, n in raw.items():
        had = num(n)
        have = now.get(name, 0) if isinstance(name, str) else 0
        if not isinstance(name, str) or had is None or have >= had:
            continue
        label = name or "(no name)"
        out.append(label if had == 1 and have == 0 else f"{label} ({have} of {int(had)})")
    shown = ", ".join(out[:8])
    return shown + (f" and {len(out) - 8} more" if len(out) > 8 else "")


def _top_names(names: Any) -> dict[str, int]:
    if not isinstance(names, Mapping):
        return {}
    good = [(k, int(v)) for k, v in names.items() if isinstance(k, str) and num(v)]
    return dict(sorted(good, key=lambda kv: -kv[1])[:NAMES_KEPT])


def _churn(facts: ClientsFacts, at: float) -> tuple[float, float, float, int, int] | None:
    """(new connections a second, short-lived ones a second, the interval, new, short-lived)
    between the previous round and this one, or None on a first round, after a broker
    restart (another run_id, or the counter went down) or without the counter. Short-lived:
    received in the interval and already gone (received minus the clients now connected
    that are younger than the interval): a pool's connections stay, so a deploy, whose new
    connections are all still there, is not churn."""
    previous = facts.previous or {}
    before, before_at = num(previous.get("received")), num(previous.get("at"))
    if facts.received is None or before is None or before_at is None:
        return None
    if previous.get("run_id") != facts.run_id or facts.received < before:
        return None
    seconds = at - before_at
    if seconds <= 0:
        return None
    new = facts.received - int(before)
    young = sum(n for age, n in facts.ages.items() if age <= seconds)
    short = max(new - young, 0)
    return new / seconds, short / seconds, seconds, new, short


CHECK = ClientsCheck()
