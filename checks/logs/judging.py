"""Judging each log source (a file or a journal query), one row each: recency against
max_age/crit_age, error floods, the zone cross-check and the host's clock skew.

Every status comes from the shared vocabulary (fleetcheck.core.judge): the age limit and the
worst of the findings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from fleetcheck.checks.logs.config import LogsConfig, LogsFacts
from fleetcheck.checks.logs.reading import (
    newest_of,
    newest_stamped,
    no_stamp,
    read_lines,
    unreadable_tail,
    utc_times,
)
from fleetcheck.checks.logs.zones import (
    date_mixup,
    date_shift_s,
    time_label,
    zone_for,
    zone_mismatch,
    zone_offset_halves,
)

from fleetcheck.config import HostConfig
from fleetcheck.core.hostfacts import LogsHostConfig, LogSpec
from fleetcheck.core.judge import exceeds, limit_text, worst
from fleetcheck.core.model import Result, Status
from fleetcheck.parse.duration import format_duration

if TYPE_CHECKING:  # the parsers load only when a patrol reads a log
    from fleetcheck.parse.journal import JournalFacts
    from fleetcheck.parse.logtail import LogFacts

FUTURE_SLACK_S = 300.0


@dataclass
class LogVerdict:
    path: str
    status: Status
    summary: str
    metrics: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)
    strength: str | None = None  # a non-OK verdict's evidence strength when not the check's


def empty_verdict(
    mtime: datetime, mtime_age: float, host_now: datetime, spec: LogSpec
) -> tuple[Status, str, str | None]:
    """An empty log file, judged by its mtime like any silent log (status, summary, strength).
    Rotation or creation empties it at its mtime; a writer still holding the rotated file
    leaves it empty for ever, so it escalates by max_age/crit_age, never rests as UNKNOWN.
    The evidence is behaviour, not proof: the writer may be alive, writing to the old file."""
    when = f"{mtime:%H:%M:%S} UTC"
    if mtime.date() != host_now.date():
        when += f" on {mtime:%Y-%m-%d}"
    status = spec.age_limit.status(mtime_age)
    ago = f"{format_duration(max(mtime_age, 0))} ago"
    if status is Status.OK:
        return status, f"empty since {when} (rotated or created then), {ago}", None
    return (
        status,
        f"empty since {when} (rotated, truncated or created then), {ago}: nothing written "
        f"since{spec.age_limit.reason(status)}; a writer may still hold the rotated file "
        "(reopen the log after rotation)",
        "behaviour",
    )


def source_words(spec: LogSpec, json_lines: bool = False) -> str:
    """What the row says it read: `file PATH`, `JSON lines PATH`, `journal UNIT/MATCHES`."""
    if spec.is_journal:
        return f"journal {spec.label}"
    return f"{'JSON lines' if json_lines else 'file'} {spec.path}"


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


def flood_verdict(
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
    if exceeds(flood.error_lines, spec.max_error_lines):
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
    metrics, evidence = _blank(path, json_file, lf, host, facts)

    def verdict(status: Status, summary: str, strength: str | None = None) -> LogVerdict:
        words = source_words(spec, json_lines=evidence["source"] == "json")
        return LogVerdict(path, status, f"{words}: {summary}", metrics, evidence, strength)

    if lf.state != "ok":
        return verdict(Status.UNKNOWN, lf.detail or lf.state)
    assert lf.mtime is not None and lf.size is not None
    host_now = now + timedelta(seconds=facts.clock_skew_s or 0.0)  # ages on the host's clock
    mtime = datetime.fromtimestamp(lf.mtime, UTC)
    mtime_age = (host_now - mtime).total_seconds()
    metrics["mtime_age_s"] = round(mtime_age, 3)
    evidence["mtime"] = iso_utc(mtime, "auto")
    if lf.size == 0:
        status, summary, strength = empty_verdict(mtime, mtime_age, host_now, spec)
        metrics["age_s"] = metrics["mtime_age_s"]
        evidence.update(last_line_at=None, age_from="mtime", empty_since=evidence["mtime"])
        return verdict(status, summary, strength)
    unreadable = unreadable_tail(lf, spec)
    if unreadable:
        return verdict(Status.UNKNOWN, unreadable)
    lines = [line.removesuffix("\r") for line in complete_lines(lf.tail, lf.size)]  # CRLF files
    if not lines:
        return verdict(
            Status.UNKNOWN,
            f"no complete line in the last {size_text(len(lf.tail))} (a single line longer "
            f"than tail_bytes {spec.tail_bytes}); cannot see a timestamp",
        )
    tail = read_lines(lines, spec, lf.mtime)
    if tail.json_lines:
        evidence["source"] = "json"
    if tail.detection is not None:
        evidence["format"] = tail.detection.evidence()
    elif not tail.json_lines:
        evidence["format"] = {"name": "setting", "format": spec.format, "regex": spec.regex}
    zone, zone_name, zone_problem = zone_for(host, facts)
    evidence["tz"] = zone_name
    stamped = newest_stamped(lines, tail.find)
    if not stamped:
        return verdict(
            Status.UNKNOWN,
            no_stamp(lines, spec, tail.json_lines, len(lf.tail), tail.detection),
        )
    if zone is None and any(s.offset is None and s.kind != "epoch" for _, s in stamped):
        return verdict(Status.UNKNOWN, zone_problem or "no zone for this host")
    utc_zone: tzinfo = zone or UTC
    newest_line, newest_stamp, newest = newest_of(stamped, utc_zone, zone_name, now, mtime)
    age = (host_now - newest.utc).total_seconds()
    evidence["last_line_at"] = iso_utc(newest.utc, "auto")
    evidence["age_from"] = "line"
    metrics["age_s"] = round(age, 3)
    evidence["last_line"] = newest_line[:200]
    evidence["zone"] = newest.zone
    note = ""
    if newest.note:
        evidence["note"] = newest.note
        note = f"; {newest.note}"

    times = utc_times([st for _, st in tail.records], utc_zone, zone_name, now, mtime)
    statuses, errors_text, flood_metrics = flood_verdict(
        flood_of(len(tail.errors), times),
        spec,
        "error lines",
        f"the last {size_text(len(lf.tail))}",
    )
    metrics.update(flood_metrics)
    if errors_text:
        errors_text += f", file {size_text(lf.size)}"

    distrusted = _distrusted(newest_stamp, newest, mtime, zone_name, config, metrics, evidence)
    if distrusted:
        status = worst([Status.WARN, spec.age_limit.status(mtime_age), *statuses])
        summary = f"{distrusted}; by mtime the log is {format_duration(mtime_age)} old"
        return verdict(status, summary + note + errors_text)
    where = f"last line {time_label(newest)}"
    after = (mtime - newest.utc).total_seconds()
    if (newest_stamp.offset is not None or newest_stamp.kind == "epoch") and after > 3600:
        # a stamp with its own offset is believed; a file touched long after it is noted
        evidence["mtime_after_line_s"] = round(after, 3)
        note += f"; file modified {format_duration(after)} after its last stamped line"
    if newest.utc.date() != host_now.date():
        where += f" on {newest.utc:%Y-%m-%d}"
    return verdict(*recency(age, where, spec, note + errors_text, statuses))


def _blank(
    path: str, json_file: bool, lf: LogFacts, host: HostConfig, facts: LogsFacts
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A file's metrics and evidence before anything is read of it: every key, unmeasured."""
    metrics: dict[str, Any] = {
        "age_s": None,
        "mtime_age_s": None,
        "clock_skew_s": facts.clock_skew_s,
        "error_lines": None,
        "error_rate_per_s": None,
        "size_bytes": lf.size,
    }
    evidence: dict[str, Any] = {
        "path": path,
        "source": "json" if json_file else "file",
        "tz": host.settings(LogsHostConfig).tz,
        "last_line_at": None,
    }
    return metrics, evidence


def _distrusted(
    newest_stamp: Any,
    newest: Any,
    mtime: datetime,
    zone_name: str,
    config: LogsConfig,
    metrics: dict[str, Any],
    evidence: dict[str, Any],
) -> str | None:
    """Why the newest line's time cannot be believed (its zone off by whole hours from the
    file's mtime, or its date read the wrong way round), None when it can. When it cannot,
    every age and time of the row becomes the mtime's (the line's kept in the evidence)."""
    if not config.zone_check:
        return None
    halves = zone_offset_halves(newest_stamp, newest, mtime)
    shift = 0.0 if halves else date_shift_s(newest_stamp, newest, mtime)
    if not (halves or shift):
        return None
    if halves:
        summary, evidence["zone_check"] = zone_mismatch(halves, newest, mtime, zone_name)
    else:
        summary, evidence["date_check"] = date_mixup(shift, newest, mtime)
    evidence["line_at"] = evidence["last_line_at"]
    evidence["line_age_s"] = metrics["age_s"]
    evidence["last_line_at"] = evidence["mtime"]
    evidence["age_from"] = "mtime"
    metrics["age_s"] = metrics["mtime_age_s"]
    return summary


def recency(
    age: float, where: str, spec: LogSpec, tail_text: str, statuses: list[Status]
) -> tuple[Status, str]:
    if age < -FUTURE_SLACK_S:
        return (
            Status.WARN,
            f"{where}, {format_duration(-age)} in the FUTURE (zone or clock wrong?){tail_text}",
        )
    status = spec.age_limit.status(age)
    ago = f"{format_duration(max(age, 0))} ago"
    limit = spec.age_limit.reason(status)
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
    words = source_words(spec)

    def verdict(status: Status, summary: str) -> LogVerdict:
        return LogVerdict(f"journal:{label}", status, f"{words}: {summary}", metrics, evidence)

    if jf.state != "ok" or jf.read is None:
        return verdict(Status.UNKNOWN, jf.detail or jf.state)
    read = jf.read
    if read.notes:
        evidence["journalctl"] = list(read.notes)[:5]
    where_dir = f" in {spec.journal_dir}" if spec.journal_dir else ""
    if read.denied:
        said = next(
            (n for n in read.notes if "permission" in n.lower()), "insufficient permissions"
        )
        return verdict(
            Status.UNKNOWN,
            f"no permission to read the journal{where_dir}: the SSH user is not in the "
            f"systemd-journal or adm group (journalctl: {said[:160]})",
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
    statuses, errors_text, flood_metrics = flood_verdict(
        flood, spec, "error entries (PRIORITY <= 3)", f"the newest {read.count}"
    )
    metrics.update(flood_metrics)
    return verdict(*recency(age, where, spec, errors_text, statuses))


def item_rows(
    specs: tuple[LogSpec, ...],
    facts: LogsFacts,
    config: LogsConfig,
    host: HostConfig,
    now: datetime,
    result: Callable[..., Result],
) -> list[Result]:
    """A row per log of the host (built by `result`, the check's), each judged alone; a host
    clock off by more than max_clock_skew adds a WARN to each (their ages are read on that
    clock)."""
    from fleetcheck.parse.logtail import LogFacts

    verdicts = [
        judge_log(spec, lf, host, facts, config, now)
        if isinstance(lf, LogFacts)
        else judge_journal(spec, lf, facts, now)
        for spec, lf in zip(specs, facts.logs, strict=True)
    ]
    skew = facts.clock_skew_s
    skewed = skew is not None and abs(skew) > config.max_clock_skew
    skew_note = ""
    if skew is not None and skewed:
        side = "ahead of" if skew > 0 else "behind"
        skew_note = (
            f"; host clock is {format_duration(abs(skew))} {side} ours "
            f"({limit_text('max_clock_skew', config.max_clock_skew)})"
        )
    rows = []
    for v in verdicts:
        status = worst([v.status, Status.WARN]) if skewed else v.status
        metrics: dict[str, Any] = dict(v.metrics)
        metrics["clock_skew_s"] = None if skew is None else round(skew, 3)
        evidence: dict[str, Any] = dict(v.evidence)
        if facts.zone is not None:
            evidence["tz_auto"] = {
                "zone": facts.zone.name,
                "how": facts.zone.how,
                "offset": facts.zone.offset,
            }
        strength = v.strength if v.status is status else None
        summary = v.summary + skew_note
        kw = {"metrics": metrics, "evidence": evidence, "evidence_strength": strength}
        rows.append(result(host, status, summary, item=v.path, **kw))
    return rows
