"""live_hash: zombie entries in the hash of running matches. (incident 1)

Workers HSET an entry when a match starts and HDEL it when it ends; a SIGKILLed worker leaks
its entry forever (no per-field TTL before Redis 7.4 / Valkey 9). An entry older than
`max_age` (the match wall plus margin) is certainly dead;
one whose start is missing or unreadable cannot prove it is alive, so it is stale and counted
as malformed. Read with HSCAN, never HGETALL. `fleetcheck reap-live` removes them safely.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fleetcheck.config import Duration, FleetConfig, HostConfig, InvalidValue, zone
from fleetcheck.core.check import Check, Commands, Key, cmd
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.declarations import ChartSpec, Line
from fleetcheck.core.judge import check_count, check_duration, check_share, exceeds
from fleetcheck.core.model import Result, Status
from fleetcheck.parse.duration import format_duration

if TYPE_CHECKING:  # the demo's lab, for demo_fault's type only (never imported at run time)
    from fleetcheck.core.discovery import Draft, Sample
    from fleetcheck.lab.demo import DemoFleet

if TYPE_CHECKING:  # the scan code is imported by the probe, not by the config's validation
    from fleetcheck.checks.live_hash.scan import LiveScan


@dataclass(frozen=True)
class LiveHashConfig:
    key: str = "arena:live"  # the hash of running matches
    max_age: Duration = 900.0  # older than this: certainly dead (match wall + margin)
    match_wall: Duration = 600.0  # the longest a match may run; reap-live refuses a lower max_age
    max_clock_skew: Duration = 60.0  # reap-live refuses past this skew from the broker's TIME
    started_field: str = "started_at"  # JSON field holding the start (epoch or ISO 8601)
    owner_field: str = "host"  # JSON field naming the worker's host ("" for none)
    naive_tz: str | None = None  # zone of ISO starts written without offset (else malformed)
    crit_count: int | None = None  # CRIT when more stale entries than this
    crit_share: float | None = 0.5  # CRIT when more than this share of entries is stale
    scan_count: int = 500  # HSCAN COUNT per round trip
    show: int = 5  # stale entries listed as evidence

    def __post_init__(self) -> None:
        if not self.key:
            raise InvalidValue("key", "must not be empty")
        check_duration("max_age", self.max_age)
        check_duration("match_wall", self.match_wall)
        check_duration("max_clock_skew", self.max_clock_skew)
        if not self.started_field:
            raise InvalidValue("started_field", "must not be empty")
        if self.naive_tz is not None:
            zone(self.naive_tz, "naive_tz")
        check_count("crit_count", self.crit_count)
        check_share("crit_share", self.crit_share, zero_ok=True)
        check_count("scan_count", self.scan_count, minimum=10, maximum=5000)
        check_count("show", self.show, minimum=0, maximum=100)


@dataclass(frozen=True)
class LiveHashFacts:
    scan: LiveScan
    owners_connected: dict[str, bool | None]  # owner -> has broker connections (None: unknown)
    hexpire: bool  # the server has per-field TTLs
    server: str  # "redis 7.0.15" for the advice line
    # the broker's clock minus the patrol's (TIME; None: unreadable, ages on the patrol's)
    clock_offset_s: float | None = 0.0


def owner_presence(
    owners: list[str], hosts: tuple[HostConfig, ...], connected: set[str]
) -> dict[str, bool | None]:
    """For each owner name: True/False if we can tell whether it holds broker connections
    (it is a configured host's name or one of its addresses, or an IP), None if we cannot."""
    from fleetcheck.config.values import ip_address_problem
    from fleetcheck.core.hostfacts import addrs_of
    from fleetcheck.parse.clientlist import normalise_ip

    out: dict[str, bool | None] = {}
    for owner in owners:
        addrs: set[str] | None = None
        ip = normalise_ip(owner)
        for h in hosts:
            claimed = {normalise_ip(a) for a in addrs_of(h)}
            if owner == h.name or ip in claimed:
                addrs = claimed or None
                break
        else:
            if ip_address_problem(ip) is None:  # an IP address: its own
                addrs = {ip}
        out[owner] = None if addrs is None else bool(addrs & connected)
    return out


class LiveHashCheck(Check[LiveHashConfig, LiveHashFacts]):
    name = "live_hash"
    description = "zombie entries in the live-matches hash (HSCAN; stale and malformed)"
    headline = "entries"  # what Nagios graphed before headlines were declared (the first metric)
    charts = (
        ChartSpec(
            "live",
            "Live hash: fresh vs stale entries",
            "stale entries growing: workers die without cleaning up; reap-live removes them",
            lines=(Line("fresh"), Line("stale")),
            place=20,
        ),
    )
    example = """\
[checks.live_hash]
# The check only reads (HSCAN). WRITES TO YOUR BROKER only when you run `fleetcheck reap-live
# --apply`, which DELETES the stale fields of this hash (a dry run without --apply deletes nothing).
key = "arena:live"               # the hash of running matches (HSCANned, never fetched whole)
max_age = "900s"                 # older than this: certainly dead (match wall + margin)
match_wall = "600s"              # the longest a match runs: reap-live refuses a max_age below it
max_clock_skew = "60s"           # reap-live refuses when our clock and the broker's differ more
started_field = "started_at"     # JSON field holding the start (epoch or ISO 8601)
owner_field = "host"             # JSON field naming the worker's host ("" for none)
# naive_tz = "UTC"               # zone of ISO starts written without offset (unset: malformed)
# crit_count = 50                # CRIT when more stale entries than this
crit_share = 0.5                 # CRIT when more than this share of entries is stale
scan_count = 500                 # HSCAN COUNT per round trip
show = 5                         # stale entries listed as evidence
"""
    demo_meaning = (
        "entries of the live hash whose match is certainly over: leaked when workers "
        "were SIGKILLed; `fleetcheck reap-live --apply` removes exactly those (incident 1)"
    )

    def broker_commands(self, fleet: FleetConfig, config: LiveHashConfig) -> Commands:
        return (
            cmd("TIME"),
            cmd("INFO"),
            cmd("CLIENT", "ID"),
            cmd("CLIENT", "LIST"),
            cmd("TYPE", Key(config.key)),
            cmd("HSCAN", Key(config.key), "0", "COUNT", "1"),
        )

    def discover_draft(self, sample: Sample) -> Draft | None:
        """The hash whose sampled values look most like running matches."""
        from fleetcheck.core.discovery import Draft, live_hash_guess, toml_str

        live = live_hash_guess(sample.keys)
        if live is None:
            return Draft(("# no hash looked like a live hash (JSON values with a start time)",))
        lines = ["[checks.live_hash]", f"key = {toml_str(live.key)}"]
        if live.started_field != "started_at":
            lines.append(f"started_field = {toml_str(live.started_field)}")
        if live.owner_field and live.owner_field != "host":
            lines.append(f"owner_field = {toml_str(live.owner_field)}")
        lines.append('max_age = "900s"  # longer than any real match may run')
        return Draft(tuple(lines), (live.key,))

    def demo_fault(self, fleet: DemoFleet) -> str | None:
        """Twelve zombies of mini's among thirty live matches of n8's, and two malformed."""
        import json

        live = {}
        for i in range(30):  # up to 7m15s old: far from max_age (15m) however long a patrol takes
            live[f"m{i}"] = json.dumps({"started_at": fleet.now - 15 * i, "host": "n8"})
        for i in range(12):
            live[f"z{i}"] = json.dumps({"started_at": fleet.now - 7200 - 600 * i, "host": "mini"})
        live["bad1"] = "not json"
        live["bad2"] = json.dumps({"host": "laptop"})
        with fleet.lab.client() as r:
            r.hset("arena:live", mapping=live)
        return 'key = "arena:live"\nmax_age = "900s"'

    def probe(
        self, ctx: PatrolContext, host: HostConfig | None, config: LiveHashConfig
    ) -> LiveHashFacts:
        from fleetcheck.checks.live_hash.evidence import read_broker_clock
        from fleetcheck.checks.live_hash.scan import any_stale, read_live

        from fleetcheck.transport.redis import server_identity, supports

        r = ctx.broker()
        tz = zone(config.naive_tz, "naive_tz") if config.naive_tz else None
        offset: float | None = None
        try:
            offset = read_broker_clock(r, lambda: ctx.clock().timestamp()).offset_s
        except Exception:
            pass  # ages on the patrol's clock, and the evidence says so
        try:
            scan = read_live(
                r,
                config.key,
                count=config.scan_count,
                started_field=config.started_field,
                owner_field=config.owner_field or None,
                assume_tz=tz,
                keep=max(config.show, 1),
            )
        except Exception as e:
            raise ctx.broker_error(e) from None
        owners = sorted(set(scan.owner_names) | set(scan.malformed_owners))
        presence: dict[str, bool | None] = {o: None for o in owners}
        # CLIENT LIST costs the server tens of ms with 10k clients: read it (or share the
        # patrol's copy) only when some stale entry has an owner to look for
        if owners and any_stale(scan, ctx.clock().timestamp() + (offset or 0.0), config.max_age):
            try:
                connected = ctx.client_table().hosts()
                presence = owner_presence(owners, ctx.fleet.hosts, connected)
            except Exception:
                pass  # evidence only: without CLIENT LIST no leak is called confirmed
        info: dict[str, Any] = {}
        try:
            info = ctx.info()
        except Exception:
            pass
        server, version = server_identity(info)
        label = f"{server} {'.'.join(map(str, version))}" if version else server
        return LiveHashFacts(
            scan, presence, bool(info) and supports(info, "hexpire"), label, offset
        )

    def evaluate(
        self, facts: LiveHashFacts, config: LiveHashConfig, host: HostConfig | None, now: datetime
    ) -> Result:
        scan = facts.scan
        key = config.key
        if scan.kind not in ("hash", "none"):
            from fleetcheck.checks.live_hash.scan import describe_kind

            return self.result(host, Status.UNKNOWN, describe_kind(key, scan.kind))
        from fleetcheck.checks.live_hash.scan import stale_counts, stale_flags

        t = now.timestamp() + (facts.clock_offset_s or 0.0)  # on the broker's clock
        max_age = config.max_age
        old, future, stale_by_owner = stale_counts(scan, t, max_age)
        oldest_start = min(scan.starts) if scan.starts else None
        malformed = scan.malformed + future
        stale = old + malformed
        entries = scan.entries
        fresh = entries - stale
        oldest_age = None if oldest_start is None else round(max(0.0, t - oldest_start), 3)
        metrics: dict[str, Any] = {
            "entries": entries,
            "fresh": fresh,
            "stale": stale,
            "malformed": malformed,
            "oldest_age_s": oldest_age,
        }
        if scan.kind == "none":
            return self.result(
                host, Status.OK, f"{key}: absent (no running matches recorded)", metrics=metrics
            )
        leaks = sorted(o for o in stale_by_owner if facts.owners_connected.get(o) is False)
        examples: list[dict[str, Any]] = []
        old_flags, _ = stale_flags([start for start, _, _ in scan.oldest], t, max_age)
        for (start, name, owner), is_old in zip(scan.oldest, old_flags, strict=True):
            if len(examples) >= config.show or not is_old:
                break
            examples.append(self._example(name, round(t - start, 3), None, owner, facts))
        for name, problem, bad_owner in scan.malformed_samples:
            if len(examples) >= config.show * 2:
                break
            examples.append(self._example(name, None, problem, bad_owner, facts))
        advice = (
            f"{facts.server} has HEXPIRE: let workers give each field a TTL "
            f"(HEXPIRE {key} <wall+margin> FIELDS 1 <id>) so leaks expire by themselves"
            if facts.hexpire
            else f"{facts.server} has no per-field TTL (HEXPIRE needs Redis >= 7.4 or "
            f"Valkey >= 9): remove zombies with `fleetcheck reap-live --apply`"
        )
        evidence: dict[str, Any] = {
            "stale_examples": examples,
            "stale_by_owner": dict(
                sorted(stale_by_owner.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
            ),
            "confirmed_leaks": leaks,
        }
        if future:
            evidence["future_starts"] = future
        if facts.clock_offset_s is None:
            evidence["clock"] = "broker's TIME unreadable: ages on the patrol machine's clock"
        elif abs(facts.clock_offset_s) >= 1.0:
            evidence["clock"] = (
                f"ages on the broker's clock, {format_duration(abs(facts.clock_offset_s))} "
                f"{'behind' if facts.clock_offset_s < 0 else 'ahead of'} the patrol machine's"
            )
        age_text = format_duration(max_age)
        if stale == 0:
            oldest = f", oldest {format_duration(oldest_age)}" if oldest_age is not None else ""
            return self.result(
                host,
                Status.OK,
                f"{key}: {entries} entries, all younger than {age_text}{oldest}",
                metrics=metrics,
                evidence=evidence,
            )
        evidence["advice"] = advice
        share = stale / entries if entries else 0.0
        crit = exceeds(stale, config.crit_count) or exceeds(share, config.crit_share)
        parts = []
        if old:
            parts.append(f"{old} older than {age_text}")
        if malformed:
            parts.append(f"{malformed} malformed")
        summary = f"{key}: {stale} of {entries} entries stale ({', '.join(parts)})"
        if old and oldest_age is not None:
            summary += f", oldest {format_duration(oldest_age)}"
        if leaks:
            summary += f"; confirmed leak: {', '.join(leaks)} not connected to the broker"
        summary += "; fleetcheck reap-live removes them"
        return self.result(
            host,
            Status.CRIT if crit else Status.WARN,
            summary,
            metrics=metrics,
            evidence=evidence,
        )

    @staticmethod
    def _example(
        name: str, age: float | None, problem: str | None, owner: str | None, facts: LiveHashFacts
    ) -> dict[str, Any]:
        row: dict[str, Any] = {"id": name}
        if age is not None:
            row["age_s"] = age
        if problem is not None:
            row["malformed"] = problem
        if owner is not None:
            row["owner"] = owner
            connected = facts.owners_connected.get(owner)
            if connected is False:
                row["confirmed_leak"] = True
                row["note"] = f"owner {owner} has no broker connection: confirmed leak"
        return row


CHECK = LiveHashCheck()
