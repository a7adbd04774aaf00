"""logs: is each host's log still moving, judged in UTC? (incidents 3, 4, 6)

Every timestamp is placed in UTC with an explicit zone (an offset in the line, else the host's
`tz`, else what the host says with `tz = "auto"`), and that zone is cross-checked against the
file's zone-free mtime. The error count runs here, not on the host, so `error_regex` means the
same everywhere; a flood's rate comes from the error lines' own times. The parsers of what
the host printed are in parse/logtail.py and parse/journal.py; this module judges."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from functools import cache
from typing import TYPE_CHECKING, Any

from fleetcheck.config import Duration, FleetConfig, HostConfig, InvalidValue
from fleetcheck.core.check import HostCheck
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.errors import CheckError
from fleetcheck.core.hostfacts import LogsHostConfig, LogSpec, logs_of
from fleetcheck.core.model import Result, Status, worst
from fleetcheck.parse.duration import format_duration

if TYPE_CHECKING:  # the demo's lab, for demo_fault's type only (never imported at run time)
    from fleetcheck.lab.demo import DemoFleet

if TYPE_CHECKING:  # the timestamp parser is imported by the patrol, not by config checks
    from fleetcheck.parse.timestamps import Resolved, Stamp

NEWEST_WINDOW = 50  # the newest stamp is the max over this many stamped lines from the end
ZONE_TOLERANCE_S = 90.0  # how far from a whole half hour a line/mtime gap may be
FUTURE_SLACK_S = 300.0


@dataclass(frozen=True)
class LogsConfig:
    max_clock_skew: Duration = 60.0  # WARN when the host's clock is off by more than this
    zone_check: bool = True  # compare each newest line with the file's mtime

    def __post_init__(self) -> None:
        if self.max_clock_skew <= 0:
            raise InvalidValue("max_clock_skew", "must be longer than 0s")


if TYPE_CHECKING:  # the parsers load only when a patrol reads a log
    from fleetcheck.parse.journal import JournalFacts, JournalRead
    from fleetcheck.parse.logtail import LogFacts, ZoneFacts


@dataclass(frozen=True)
class LogsFacts:
    logs: tuple[LogFacts | JournalFacts, ...]
    clock_skew_s: float | None = None
    zone: ZoneFacts | None = None  # only for tz = "auto"


# ---------------------------------------------------------------- remote side


def log_fragment(spec: LogSpec) -> str:
    """POSIX sh printing `stat MTIME SIZE` then `tail` and the last `tail_bytes` of the file,
    or one `state ...` line. The path is shell-quoted; GNU and BSD stat are both tried."""
    assert spec.path is not None
    p = shlex.quote(spec.path)
    n = int(spec.tail_bytes)
    return (
        "LC_ALL=C; export LC_ALL\n"
        f"p={p}\n"
        "if s=$(stat -L -c '%Y %s' -- \"$p\" 2>&1); then :\n"
        "elif s2=$(stat -L -f '%m %z' -- \"$p\" 2>/dev/null); then s=$s2\n"
        "else printf 'state error %s\\n' \"$s\" | head -c 400; exit 0; fi\n"
        "if [ ! -f \"$p\" ]; then echo 'state not-regular'; exit 0; fi\n"
        "if [ ! -r \"$p\" ]; then echo 'state denied'; exit 0; fi\n"
        "printf 'stat %s\\ntail\\n' \"$s\"\n"
        f'tail -c {n} -- "$p"'
    )


JOURNAL_BYTES_PER_ENTRY = 4096  # bound on what one journal query may print, per entry asked
JOURNAL_MAX_BYTES = 2 * 1024 * 1024


# On the host, awk keeps the newest entry whole (its MESSAGE is the evidence), shrinks each
# other error entry (PRIORITY <= 3) to `e REALTIME PRIORITY`, drops the rest and ends with
# `n COUNT`: a healthy journal costs the client two lines, not ~350 bytes per entry. The
# anchors match only a key, never text inside a JSON string (where quotes are escaped).
_JOURNAL_COMPACT = (
    "awk 'n==0 && /^[{]/ {print; n=1; next} "
    '/^[{].*[}]$/ {n++; p=""; '
    'if (match($0, /[{,]"PRIORITY":"[0-9]"/)) p=substr($0, RSTART+13, 1); '
    'if (p != "" && p+0 <= 3 && match($0, /[{,]"__REALTIME_TIMESTAMP":"[0-9]+"/)) '
    'print "e " substr($0, RSTART+25, RLENGTH-26) " " p; next} '
    '/^[{]/ {next} {print} END {print "n " n+0}\''
)


def journal_fragment(spec: LogSpec) -> str:
    """POSIX sh: the newest `entries` journal entries matching the spec, newest first, as
    JSON with only PRIORITY and MESSAGE beside the fields journalctl always adds, stderr
    merged, then `@@rc N`; of the others only the error entries, as time and priority, then
    their count;
    when none matched, the whole journal's newest entry after `@@any` (an empty journal vs a
    unit that never logged). Bounded by `head -c`, newest first so a cut loses the oldest.
    systemd before 236 lacks --output-fields: asked again without."""
    args = ["--no-pager", "-r", "-o", "json"]
    if spec.journal_dir is not None:
        args.append("--directory=" + spec.journal_dir)
    select = []
    if spec.journal is not None:
        select += ["-u", spec.journal]
    select += list(spec.journal_match)
    q = " ".join(shlex.quote(a) for a in args)
    sel = " ".join(shlex.quote(a) for a in select)
    limit = min(spec.journal_entries * JOURNAL_BYTES_PER_ENTRY, JOURNAL_MAX_BYTES)
    return (
        "LC_ALL=C; export LC_ALL\n"
        "command -v journalctl >/dev/null 2>&1 || { echo 'state no-journalctl'; exit 0; }\n"
        "f=--output-fields=PRIORITY,MESSAGE\n"
        f'jn() {{ {{ journalctl {q} $f "$@" 2>&1; echo "@@rc $?"; }} | head -c {limit}; }}\n'
        f"out=$(jn -n {int(spec.journal_entries)} {sel})\n"
        'case "$out" in *"unrecognized option"*output-fields*) '
        f"f=; out=$(jn -n {int(spec.journal_entries)} {sel});; esac\n"
        f"printf '%s\\n' \"$out\" | {_JOURNAL_COMPACT}\n"
        'case "$out" in "{"*|*"\n{"*) ;; *) echo @@any; jn -n 1 ;; esac'
    )


ZONE_FRAGMENT = (
    "LC_ALL=C; export LC_ALL\n"
    "printf 'TZ=%s\\n' \"${TZ-}\"\n"
    "printf 'offset=%s\\n' \"$(date +%z 2>/dev/null)\"\n"
    "lt=$(readlink /etc/localtime 2>/dev/null); printf 'localtime=%s\\n' \"$lt\"\n"
    "et=''; [ -r /etc/timezone ] && et=$(head -n 1 /etc/timezone 2>/dev/null | head -c 100)\n"
    "printf 'etc_timezone=%s\\n' \"$et\"\n"
    'if [ -z "${TZ-}$lt$et" ] && command -v timedatectl >/dev/null 2>&1; then\n'
    "  printf 'timedatectl=%s\\n' \"$(timedatectl show -p Timezone --value 2>/dev/null)\"\n"
    "fi"
)


# ---------------------------------------------------------------- the check


class LogsCheck(HostCheck[LogsConfig, LogsFacts]):
    name = "logs"
    description = "log-tail recency normalised to UTC, zone cross-check, error floods"
    config_type = LogsConfig
    host_config_type = LogsHostConfig
    headline = "age_s"
    example = """\
[checks.logs]
max_clock_skew = "60s"           # WARN when the host's clock differs from ours by more than this
zone_check = true                # WARN when newest line and file mtime differ by whole hours
"""
    host_example = """\
tz = "America/New_York"                      # zone its logs are written in; "auto" asks the host
logs = [
  { path = "/var/log/arena/worker.log", max_age = "10m" },
  # a JSON-lines log (structlog, pino, bunyan, zap, logrus, Docker json-file); also detected
  { path = "/var/log/arena/api.jsonl", format = "json", max_age = "10m" },
  # a systemd unit's journal (errors: PRIORITY <= 3); or journal_match = ["SYSLOG_IDENTIFIER=rater"]
  { journal = "rater.service", max_age = "10m" },
  # every log key:
  # { path = "/var/log/arena/rater.log",    # the file to watch
  #   max_age = "10m",                      # last line older: WARN
  #   crit_age = "30m",                     # older still: CRIT (default 3 x max_age)
  #   format = "%Y-%m-%d %H:%M:%S",         # strptime format (overrides detection; %z ok, %Z no)
  #   regex = '^\\[(?P<ts>[^\\]]+)\\]',        # or a regex with a group named ts
  #   error_regex = "ERROR|Traceback|Exception",  # lines counted as errors in the tail
  #   max_error_lines = 1000,               # more error lines in the tail: WARN (unset: no limit)
  #   max_error_rate = 10.0,                # WARN past this many error lines a minute; 0: off
  #   tail_bytes = 65536,                   # how much of the file's end is read
  #   time_field = "ts" },                  # JSON lines: the time field (default: time, ts,
  #                                         #   timestamp, @timestamp, t; dotted paths ok)
  # every journal key (instead of path):
  # { journal = "worker.service",           # a systemd unit (journalctl -u)
  #   journal_match = ["SYSLOG_IDENTIFIER=rater"],  # and/or journalctl matches ("+" = or)
  #   journal_dir = "/var/log/journal",     # journalctl --directory (journals kept elsewhere)
  #   entries = 300,                        # newest entries read (journalctl -n)
  #   max_age = "10m", crit_age = "30m", max_error_lines = 100, max_error_rate = 10.0 },
]
"""
    no_targets_reason = "no host has logs configured"
    demo_meaning = (
        "this machine's log stopped moving; read in the writer's own zone and compared in "
        "UTC, so it is really silent, not a time-zone illusion (incidents 3, 6)"
    )

    def demo_fault(self, fleet: DemoFleet) -> str | None:
        """Logs in three zones; mini's stopped 2.5 hours ago.

        n8 writes US Eastern without an offset: a naive reader comparing its last line with a
        UTC clock calls it 5 hours stale. laptop writes classic syslog in Asia/Kolkata.
        """
        from fleetcheck.zones import zone_named

        now = fleet.now

        def eastern(t: float) -> str:
            local = datetime.fromtimestamp(t, zone_named("America/New_York"))
            return local.strftime("%Y-%m-%d %H:%M:%S,") + f"{local.microsecond // 1000:03d}"

        def kolkata(t: float) -> str:
            return datetime.fromtimestamp(t, zone_named("Asia/Kolkata")).strftime("%b %d %H:%M:%S")

        def utc(t: float) -> str:
            return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        stopped = now - 2.5 * 3600
        written = {
            "n8": ([f"{eastern(now - 60 * i)} INFO match done" for i in (5, 3, 1)], now - 60),
            "laptop": (
                [f"{kolkata(now - 60 * i)} laptop worker[311]: match done" for i in (4, 2)],
                now - 120,
            ),
            "mini": (
                [f"{utc(stopped - 60)} INFO match done", f"{utc(stopped)} INFO match done"],
                stopped,
            ),
            "broker": ([f"{utc(now - 30)} INFO rater loop tick"], now - 30),
        }
        zones = {"n8": "America/New_York", "laptop": "Asia/Kolkata", "mini": "UTC", "broker": "UTC"}
        for host, (lines, mtime) in written.items():
            path = fleet.write_log(host, lines, mtime)
            fleet.host_keys(
                host, f'tz = "{zones[host]}"', f'logs = [{{ path = "{path}", max_age = "10m" }}]'
            )
        return ""

    def demo_explain(self, result: Result) -> str | None:
        if result.host == "n8" and result.status is Status.OK:
            return (
                "n8 logs in US Eastern time without an offset. Its last line "
                "reads about 5 hours behind UTC, which a naive reader would call 5 hours silent; "
                "read in its declared zone it was written a minute ago (incident 6)."
            )
        return super().demo_explain(result)

    def targets(self, fleet: FleetConfig, config: LogsConfig) -> list[HostConfig | None]:
        return [h for h in fleet.hosts if h.ssh is not None and logs_of(h)]

    def remote_commands(
        self, host: HostConfig, config: LogsConfig, fleet: FleetConfig
    ) -> dict[str, str]:
        own = host.settings(LogsHostConfig)
        out = {
            f"log{i}": journal_fragment(spec) if spec.is_journal else log_fragment(spec)
            for i, spec in enumerate(own.logs)
        }
        if own.tz == "auto":
            out["tz"] = ZONE_FRAGMENT
        return out

    def probe_host(self, ctx: PatrolContext, host: HostConfig, config: LogsConfig) -> LogsFacts:
        from fleetcheck.parse.journal import parse_journal_facts
        from fleetcheck.parse.logtail import parse_log_output, parse_zone_output

        own = host.settings(LogsHostConfig)
        facts = ctx.host_facts(host, self)
        logs: list[LogFacts | JournalFacts] = []
        for i, spec in enumerate(own.logs):
            frag = facts.get(f"log{i}")
            if spec.is_journal:
                logs.append(parse_journal_facts(spec.label, frag.rc, frag.text))
            else:
                assert spec.path is not None
                logs.append(parse_log_output(spec.path, frag.rc, frag.output))
        zone = None
        if own.tz == "auto":
            zone = parse_zone_output(facts.get("tz").text)
        return LogsFacts(tuple(logs), facts.clock_skew_s, zone)

    def evaluate_host(
        self, facts: LogsFacts, config: LogsConfig, host: HostConfig, now: datetime
    ) -> Result:
        from fleetcheck.parse.logtail import LogFacts

        own = host.settings(LogsHostConfig)
        if len(facts.logs) != len(own.logs):
            raise CheckError("facts do not match the configured logs")
        verdicts = [
            judge_log(spec, lf, host, facts, config, now)
            if isinstance(lf, LogFacts)
            else judge_journal(spec, lf, facts, now)
            for spec, lf in zip(own.logs, facts.logs, strict=True)
        ]
        status = worst(v.status for v in verdicts)
        skew = facts.clock_skew_s
        skew_note = ""
        if skew is not None and abs(skew) > config.max_clock_skew:
            status = worst([status, Status.WARN])
            side = "ahead of" if skew > 0 else "behind"
            skew_note = (
                f"; host clock is {format_duration(abs(skew))} {side} ours "
                f"(max_clock_skew {format_duration(config.max_clock_skew)})"
            )
        lead = max(verdicts, key=lambda v: v.status.rank)
        summary = lead.summary
        others = [v for v in verdicts if v is not lead]
        if others:
            counts: dict[str, int] = {}
            for v in others:
                counts[v.status.label] = counts.get(v.status.label, 0) + 1
            summary += " (other logs: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")"
        summary += skew_note
        metrics: dict[str, Any] = dict(lead.metrics)
        metrics["clock_skew_s"] = None if skew is None else round(skew, 3)
        metrics["logs"] = {v.path: v.metrics for v in verdicts}
        evidence: dict[str, Any] = {
            **{k: lead.evidence[k] for k in ("tz", "last_line_at", "source") if k in lead.evidence},
            "logs": [v.evidence for v in verdicts],
        }
        if facts.zone is not None:
            evidence["tz_auto"] = {
                "zone": facts.zone.name,
                "how": facts.zone.how,
                "offset": facts.zone.offset,
            }
        return self.result(host, status, summary, metrics=metrics, evidence=evidence)


@dataclass
class LogVerdict:
    path: str
    status: Status
    summary: str
    metrics: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)


def _zone_for(host: HostConfig, facts: LogsFacts) -> tuple[tzinfo | None, str, str | None]:
    """(zone, its name, why there is none)."""
    from fleetcheck.zones import zone_named

    tz = host.settings(LogsHostConfig).tz
    if tz == "auto":
        z = facts.zone
        if z is None or z.name is None:
            return (
                None,
                "auto",
                "tz = auto but the host's zone could not be found ("
                + (z.how if z else "no answer")
                + ")",
            )
        return zone_named(z.name), z.name, None
    if tz is None:  # config refuses log files without tz; only a hand-made host gets here
        return None, "-", "no tz configured for this host"
    return zone_named(tz), tz, None


@cache
def _zone_names() -> tuple[str, ...]:
    """This machine's zone names (a walk of tzdata: once per process, not per evaluate)."""
    from zoneinfo import available_timezones

    return tuple(sorted(available_timezones()))


def _suggest_zones(offset: timedelta, at: datetime, declared: str) -> list[str]:
    from fleetcheck.zones import zone_named

    if offset == timedelta(0):
        return ["UTC"]
    region = declared.split("/", 1)[0] if "/" in declared else ""
    preferred = (
        "America/New_York",
        "America/Chicago",
        "America/Denver",
        "America/Los_Angeles",
        "Europe/London",
        "Europe/Berlin",
        "Europe/Moscow",
        "Asia/Kolkata",
        "Asia/Shanghai",
        "Asia/Tokyo",
        "Australia/Sydney",
    )
    matches = []
    for name in _zone_names():
        if "/" not in name or name.startswith(("Etc/", "SystemV/", "posix", "right")):
            continue
        try:
            if at.astimezone(zone_named(name)).utcoffset() == offset:
                matches.append(name)
        except Exception:
            continue
    matches.sort(key=lambda n: (n not in preferred, not n.startswith(region + "/"), n))
    return matches[:2]


def _source_words(spec: LogSpec, json_lines: bool = False) -> str:
    """What the row says it read: `file PATH`, `JSON lines PATH`, `journal UNIT/MATCHES`."""
    if spec.is_journal:
        return f"journal {spec.label}"
    return f"{'JSON lines' if json_lines else 'file'} {spec.path}"


def _time_label(r: Resolved) -> str:
    """`02:21:00 EST = 07:21:00 UTC`; one time when the writer's zone is UTC itself."""
    if r.zone == "epoch":
        return f"{r.utc:%H:%M:%S} UTC (epoch)"
    if r.local.utcoffset() == timedelta(0) and (r.local.tzname() or "UTC").startswith("UTC"):
        return f"{r.utc:%H:%M:%S} UTC"
    return f"{r.local_label} = {r.utc:%H:%M:%S} UTC"


@dataclass(frozen=True)
class Flood:
    """Error lines and their rate, from the lines' own times."""

    error_lines: int  # every line judged an error, stamped or not
    events: int  # error records placed in time (a record: a stamped line and its continuation)
    span_s: float  # first to last of those records, to the sub-second where stamps have it
    rate_per_min: float | None  # None for fewer than two records: one event has no rate

    @property
    def burst(self) -> bool:
        return self.events > 1 and self.span_s < BURST_FLOOR_S


BURST_FLOOR_S = 1.0


def flood_of(error_lines: int, times: list[datetime]) -> Flood:
    """The rate of error records over the time they span (sub-second where the stamps have
    it). A span under a second counts as one second: n records within one timestamp, or
    within any second, are at least n per second (a lower bound, never an inflated one)."""
    if len(times) < 2:
        return Flood(error_lines, len(times), 0.0, None)
    span = (max(times) - min(times)).total_seconds()
    rate = len(times) / max(span, BURST_FLOOR_S) * 60
    return Flood(error_lines, len(times), span, rate)


def _flood_verdict(
    flood: Flood, spec: LogSpec, what: str, window: str
) -> tuple[list[Status], str, dict[str, Any]]:
    """(statuses, summary tail, metrics). A rate is judged only over more error records than
    max_error_rate: the few lines of one traceback never make a flood."""
    metrics = {
        "error_lines": flood.error_lines,
        "error_rate_per_s": None
        if flood.rate_per_min is None
        else round(flood.rate_per_min / 60, 4),
    }
    over = []
    if spec.max_error_lines is not None and flood.error_lines > spec.max_error_lines:
        over.append(f"more than max_error_lines {spec.max_error_lines}")
    rate = flood.rate_per_min
    if (
        rate is not None
        and spec.max_error_rate > 0
        and rate > spec.max_error_rate
        and flood.events > spec.max_error_rate
    ):
        over.append(f"over max_error_rate {spec.max_error_rate:g}/min")
    if not flood.error_lines:
        return [], "", metrics
    text = f"; {flood.error_lines} {what} in {window}"
    if rate is not None and flood.events > 1:
        if flood.burst:
            text += f", a burst: {flood.events} within one second (at least {rate / 60:,.0f}/s)"
        elif rate >= 600:
            text += f", {rate / 60:,.0f}/s"
        else:
            text += f", {rate:.1f}/min"
    if over:
        text += " (" + " and ".join(over) + ")"
    return ([Status.WARN] if over else []), text, metrics


def _record_stamps(
    lines: list[str], errors: list[int], find: Any
) -> tuple[list[tuple[int, Stamp]], int]:
    """Each error line's record stamp: its own, else the nearest stamped line above it (a
    traceback's continuation lines belong to the record that logged it). Returns one
    (record index, stamp) per distinct record, and how many error lines have no stamp."""
    cache: dict[int, Stamp | None] = {}

    def stamp_at(i: int) -> Stamp | None:
        if i not in cache:
            cache[i] = find(lines[i])
        return cache[i]

    records: dict[int, Stamp] = {}
    unplaced = 0
    for i in errors:
        for j in range(i, max(i - 200, -1), -1):
            st = stamp_at(j)
            if st is not None:
                records[j] = st
                break
        else:
            unplaced += 1
    return sorted(records.items()), unplaced


def judge_log(
    spec: LogSpec,
    lf: LogFacts,
    host: HostConfig,
    facts: LogsFacts,
    config: LogsConfig,
    now: datetime,
) -> LogVerdict:
    """One file's verdict: can its tail be read, how old is its newest line in UTC (recency),
    do its error lines flood, and does its zone agree with the file's mtime."""
    from fleetcheck.iso import iso_utc
    from fleetcheck.parse.logtail import complete_lines, size_text

    path = spec.path
    assert path is not None
    json_file = spec.format == "json"
    metrics: dict[str, Any] = {
        "age_s": None,
        "mtime_age_s": None,
        "clock_skew_s": facts.clock_skew_s,
        "error_lines": None,
        "error_rate_per_s": None,
        "size_bytes": lf.size,
    }
    tz = host.settings(LogsHostConfig).tz
    evidence: dict[str, Any] = {
        "path": path,
        "source": "json" if json_file else "file",
        "tz": tz,
        "last_line_at": None,
    }

    def verdict(status: Status, summary: str) -> LogVerdict:
        words = _source_words(spec, json_lines=evidence["source"] == "json")
        return LogVerdict(path, status, f"{words}: {summary}", metrics, evidence)

    if lf.state != "ok":
        return verdict(Status.UNKNOWN, lf.detail or lf.state)
    assert lf.mtime is not None and lf.size is not None
    host_now = now + timedelta(seconds=facts.clock_skew_s or 0.0)  # ages on the host's clock
    mtime = datetime.fromtimestamp(lf.mtime, UTC)
    mtime_age = (host_now - mtime).total_seconds()
    metrics["mtime_age_s"] = round(mtime_age, 3)
    evidence["mtime"] = iso_utc(mtime, "auto")
    unreadable = _unreadable_tail(lf, spec, mtime_age)
    if unreadable:
        return verdict(Status.UNKNOWN, unreadable)
    lines = complete_lines(lf.tail, lf.size)
    if not lines:
        return verdict(
            Status.UNKNOWN,
            f"no complete line in the last {size_text(len(lf.tail))} (a single line longer "
            f"than tail_bytes {spec.tail_bytes}); cannot see a timestamp",
        )
    tail = _read_lines(lines, spec)
    if tail.json_lines:
        evidence["source"] = "json"
    zone, zone_name, zone_problem = _zone_for(host, facts)
    evidence["tz"] = zone_name
    stamped = _newest_stamped(lines, tail.find)
    if not stamped:
        return verdict(Status.UNKNOWN, _no_stamp(lines, spec, tail.json_lines, len(lf.tail)))
    if zone is None and any(s.offset is None and s.kind != "epoch" for _, s in stamped):
        return verdict(Status.UNKNOWN, zone_problem or "no zone for this host")
    utc_zone: tzinfo = zone or UTC
    newest_line, newest_stamp, newest = _newest(stamped, utc_zone, zone_name, now, mtime)
    age = (host_now - newest.utc).total_seconds()
    evidence["last_line_at"] = iso_utc(newest.utc, "auto")
    metrics["age_s"] = round(age, 3)
    evidence["last_line"] = newest_line[:200]
    evidence["zone"] = newest.zone
    note = ""
    if newest.note:
        evidence["note"] = newest.note
        note = f"; {newest.note}"

    times = _utc_times([st for _, st in tail.records], utc_zone, zone_name, now, mtime)
    statuses, errors_text, flood_metrics = _flood_verdict(
        flood_of(len(tail.errors), times),
        spec,
        "error lines",
        f"the last {size_text(len(lf.tail))}",
    )
    metrics.update(flood_metrics)
    if errors_text:
        errors_text += f", file {size_text(lf.size)}"

    halves = _zone_offset_halves(newest_stamp, newest, mtime) if config.zone_check else 0
    if halves:
        summary, evidence["zone_check"] = _zone_mismatch(halves, newest, mtime, zone_name)
        status = worst([Status.WARN, _age_status(mtime_age, spec), *statuses])
        summary += f"; by mtime the log is {format_duration(mtime_age)} old"
        return verdict(status, summary + note + errors_text)
    where = f"last line {_time_label(newest)}"
    if newest.utc.date() != host_now.date():
        where += f" on {newest.utc:%Y-%m-%d}"
    return verdict(*_recency(age, where, spec, note + errors_text, statuses))


def _unreadable_tail(lf: LogFacts, spec: LogSpec, mtime_age: float) -> str | None:
    """Why the tail cannot be judged at all (empty, changed while read, binary), or None."""
    from fleetcheck.parse.logtail import looks_binary, size_text

    assert lf.size is not None
    tail = lf.tail
    if lf.size == 0:
        return f"empty file (modified {format_duration(mtime_age)} ago)"
    if len(tail) < min(lf.size, spec.tail_bytes):
        # stat saw more than tail could read: the file was rotated or truncated in between,
        # so the tail and the mtime describe different files; judge nothing from either
        return (
            f"changed while being read (stat: {size_text(lf.size)}, read "
            f"{size_text(len(tail))}): rotated or truncated; the next patrol reads the new file"
        )
    if looks_binary(tail):
        return f"looks binary (control bytes in the last {size_text(len(tail))}), not a text log"
    return None


@dataclass(frozen=True)
class _Lines:
    """A tail's lines, read: JSON or text, which are errors, how to find a line's stamp."""

    json_lines: bool
    errors: list[int]  # indexes of the error lines
    records: list[tuple[int, Stamp]]  # the error records placed in time
    find: Callable[[str], Stamp | None]


def _read_lines(lines: list[str], spec: LogSpec) -> _Lines:
    """Which lines are errors (the same `error_regex` on every host; for JSON lines their
    level too) and each error record's stamp."""
    from fleetcheck.parse import jsonlog
    from fleetcheck.parse.timestamps import find_with

    err_rx = re.compile(spec.error_regex)
    json_lines = spec.format == "json" or (
        spec.format is None and spec.regex is None and jsonlog.looks_like_json(lines)
    )
    if not json_lines:
        rx = re.compile(spec.regex) if spec.regex else None

        def find_text(line: str) -> Stamp | None:
            return find_with(line, spec.format, rx)

        errors = [i for i, line in enumerate(lines) if err_rx.search(line)]
        records, _ = _record_stamps(lines, errors, find_text)
        return _Lines(False, errors, records, find_text)
    objects = [jsonlog.parse_object(line) for line in lines]
    errors = []
    for i, (line, obj) in enumerate(zip(lines, objects, strict=True)):
        if obj is None:
            if err_rx.search(line):
                errors.append(i)  # a raw line among JSON (a crash's traceback) counts
        elif jsonlog.is_error(obj, line, err_rx):
            errors.append(i)
    by_line = {line: obj for line, obj in zip(lines, objects, strict=True)}

    def find_json(line: str) -> Stamp | None:
        obj = by_line.get(line)
        return None if obj is None else jsonlog.object_stamp(obj, spec.time_field)

    placed = [i for i in errors if objects[i] is not None]
    records = [(i, st) for i in placed if (st := find_json(lines[i])) is not None]
    return _Lines(True, errors, records, find_json)


def _newest_stamped(
    lines: list[str], find: Callable[[str], Stamp | None]
) -> list[tuple[str, Stamp]]:
    """The last NEWEST_WINDOW stamped lines, newest first (threads may interleave, so the
    newest is the max over them, not the last line)."""
    stamped: list[tuple[str, Stamp]] = []
    for line in reversed(lines):
        stamp = find(line)
        if stamp is not None:
            stamped.append((line, stamp))
            if len(stamped) >= NEWEST_WINDOW:
                break
    return stamped


def _no_stamp(lines: list[str], spec: LogSpec, json_lines: bool, tail_size: int) -> str:
    from fleetcheck.parse import jsonlog
    from fleetcheck.parse.logtail import size_text

    if json_lines:
        what = f"JSON time field ({spec.time_field or ', '.join(jsonlog.TIME_FIELDS)})"
    else:
        what = f"format {spec.format!r}" if spec.format else "regex" if spec.regex else "format"
    return (
        f"no parseable timestamp in the last {len(lines)} lines "
        f"({size_text(tail_size)}; no recognised {what}); last line: {lines[-1][:80]!r}"
    )


def _newest(
    stamped: list[tuple[str, Stamp]], zone: tzinfo, zone_name: str, now: datetime, hint: datetime
) -> tuple[str, Stamp, Resolved]:
    """The newest of the stamped lines in UTC: (line, its stamp, the stamp resolved)."""
    from fleetcheck.parse.timestamps import resolve

    resolved = [(line, s, resolve(s, zone, zone_name, now, hint=hint)) for line, s in stamped]
    return max(resolved, key=lambda item: item[2].utc)


def _zone_offset_halves(stamp: Stamp, newest: Resolved, mtime: datetime) -> int:
    """How many half hours the line's UTC is off the zone-free mtime, when that gap is a
    whole number of half hours (within ZONE_TOLERANCE_S) and the line carries no offset or
    epoch of its own: the declared zone is then wrong by that much. 0: no sign of that."""
    if stamp.offset is not None or stamp.kind == "epoch":
        return 0
    diff = (mtime - newest.utc).total_seconds()
    halves = round(diff / 1800)
    return halves if abs(diff - halves * 1800) <= ZONE_TOLERANCE_S else 0


def _zone_mismatch(
    halves: int, newest: Resolved, mtime: datetime, zone_name: str
) -> tuple[str, dict[str, Any]]:
    """The summary and evidence of a declared zone off by `halves` half hours."""
    from fleetcheck.iso import iso_utc

    declared_offset = newest.local.utcoffset() or timedelta(0)
    true_offset = declared_offset - timedelta(seconds=halves * 1800)
    guesses = _suggest_zones(true_offset, mtime, zone_name)
    hint = f" ({' or '.join(guesses)}?)" if guesses else ""
    summary = (
        f"declared zone looks wrong: last line {newest.local:%H:%M} {zone_name} = "
        f"{newest.utc:%H:%M} UTC, file modified {mtime:%H:%M} UTC{hint}"
    )
    evidence = {
        "declared": zone_name,
        "line_utc": iso_utc(newest.utc, "auto"),
        "mtime_utc": iso_utc(mtime, "auto"),
        "implied_offset_h": true_offset.total_seconds() / 3600,
        "suggested": guesses,
    }
    return summary, evidence


def _utc_times(
    stamps: list[Stamp], zone: tzinfo, zone_name: str, now: datetime, hint: datetime
) -> list[datetime]:
    """UTC moments of many stamps. Only the earliest and latest wall times go through the
    full resolve (DST, missing year); the rest keep their offset from those two, which is
    exact unless a DST change falls between them (then the span is still right)."""
    from fleetcheck.parse.timestamps import resolve

    if not stamps:
        return []
    lo = min(stamps, key=lambda s: s.wall)
    hi = max(stamps, key=lambda s: s.wall)
    lo_utc = resolve(lo, zone, zone_name, now, hint=hint).utc
    hi_utc = resolve(hi, zone, zone_name, now, hint=hint).utc
    out = []
    for s in stamps:
        if s is lo:
            out.append(lo_utc)
        elif s is hi:
            out.append(hi_utc)
        else:
            t = lo_utc + (s.wall - lo.wall)
            out.append(min(max(t, lo_utc), hi_utc))
    return out


def _recency(
    age: float, where: str, spec: LogSpec, tail_text: str, statuses: list[Status]
) -> tuple[Status, str]:
    if age < -FUTURE_SLACK_S:
        return (
            Status.WARN,
            f"{where}, {format_duration(-age)} in the FUTURE (zone or clock wrong?){tail_text}",
        )
    status = _age_status(age, spec)
    ago = f"{format_duration(max(age, 0))} ago"
    limit = ""
    if status is Status.CRIT:
        limit = f" (crit_age {format_duration(spec.effective_crit_age)})"
    elif status is Status.WARN:
        limit = f" (max_age {format_duration(spec.max_age)})"
    return worst([status, *statuses]), f"{where}, {ago}{limit}{tail_text}"


def judge_journal(spec: LogSpec, jf: JournalFacts, facts: LogsFacts, now: datetime) -> LogVerdict:
    """Recency from the newest entry's __REALTIME_TIMESTAMP (UTC by construction), errors
    from PRIORITY <= 3 among the newest `entries` entries."""
    from fleetcheck.iso import iso_utc

    label = spec.label
    metrics: dict[str, Any] = {
        "age_s": None,
        "clock_skew_s": facts.clock_skew_s,
        "error_lines": None,
        "error_rate_per_s": None,
        "entries": None,
    }
    evidence: dict[str, Any] = {
        "journal": label,
        "source": "journal",
        "tz": "UTC",
        "last_line_at": None,
    }
    if spec.journal_dir:
        evidence["directory"] = spec.journal_dir
    words = _source_words(spec)

    def verdict(status: Status, summary: str) -> LogVerdict:
        return LogVerdict(f"journal:{label}", status, f"{words}: {summary}", metrics, evidence)

    if jf.state != "ok" or jf.read is None:
        return verdict(Status.UNKNOWN, jf.detail or jf.state)
    read = jf.read
    if read.notes:
        evidence["journalctl"] = list(read.notes)[:5]
    where_dir = f" in {spec.journal_dir}" if spec.journal_dir else ""
    if read.denied:
        return verdict(
            Status.UNKNOWN,
            f"no permission to read the journal{where_dir}: the SSH user is not in the "
            "systemd-journal or adm group (journalctl: "
            f"{_first_note(read, 'permission') or 'insufficient permissions'})",
        )
    if not read.times_us:
        if read.any_newest_us is not None:
            newest_any = datetime.fromtimestamp(read.any_newest_us / 1e6, UTC)
            what = f"unit {spec.journal}" if spec.journal and not spec.journal_match else label
            return verdict(
                Status.UNKNOWN,
                f"no entries for {what} in the journal{where_dir} (it holds other entries, "
                f"newest {newest_any:%Y-%m-%d %H:%M:%S} UTC): the unit does not exist on this "
                "host or never logged",
            )
        if read.rc not in (0, None) or (read.notes and read.any_asked):
            note = read.notes[0] if read.notes else f"exit status {read.rc}"
            if "no such file" in note.lower():
                place = f"directory {spec.journal_dir}" if spec.journal_dir else "files"
                return verdict(Status.UNKNOWN, f"journal {place} not found ({note[:160]})")
            return verdict(Status.UNKNOWN, f"journalctl failed: {note[:200]}")
        return verdict(
            Status.UNKNOWN,
            f"the journal{where_dir} is empty (no entries at all): journald not running, or "
            "it keeps its journal elsewhere (set journal_dir)",
        )
    skew = facts.clock_skew_s or 0.0
    host_now = now + timedelta(seconds=skew)
    newest = datetime.fromtimestamp(max(read.times_us) / 1e6, UTC)
    age = (host_now - newest).total_seconds()
    evidence["last_line_at"] = iso_utc(newest, "auto")
    metrics["age_s"] = round(age, 3)
    metrics["entries"] = read.count
    if read.newest_message is not None:
        evidence["last_line"] = read.newest_message[:200]
    where = f"last entry {newest:%H:%M:%S} UTC (journal times are UTC)"
    if newest.date() != host_now.date():
        where += f" on {newest:%Y-%m-%d}"
    times = [
        datetime.fromtimestamp(t / 1e6, UTC)
        for t, p in zip(read.times_us, read.priorities, strict=True)
        if p is not None and p <= 3
    ]
    flood = flood_of(len(times), times)
    statuses, errors_text, flood_metrics = _flood_verdict(
        flood, spec, "error entries (PRIORITY <= 3)", f"the newest {read.count}"
    )
    metrics.update(flood_metrics)
    return verdict(*_recency(age, where, spec, errors_text, statuses))


def _first_note(read: JournalRead, word: str) -> str | None:
    for n in read.notes:
        if word in n.lower():
            return n[:160]
    return None


def _age_status(age: float, spec: LogSpec) -> Status:
    if age > spec.effective_crit_age:
        return Status.CRIT
    if age > spec.max_age:
        return Status.WARN
    return Status.OK


CHECK = LogsCheck()
