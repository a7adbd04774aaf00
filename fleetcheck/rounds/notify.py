"""Chat, e-mail and webhook messages through Apprise: one message per round, only when the
round changed something a target wants to hear.

Each target (an Apprise URL with its filters) gets, in one message: the new problems first
(host, check, the one-line reason, since when, how strong the evidence is), rows that started
flapping (once, not at every change), reminders of problems that have lasted `remind_every`
since they were last told, the recoveries, then a count of what is still failing. Rows that
share one cause (a broker that did not answer) are one line, not twenty. A row is a problem
once it alerts (after `fail_after` bad rounds, see rounds.state); a silenced row tells
nothing while its silence lasts, and is told as new if it is still bad when the silence ends.

`plan` is pure (table-tested): the report, what the target was told (the ledger,
below) and the time give the message and the new ledger entries. `send`
delivers in a thread with a deadline (Apprise's socket timeouts alone do not bound a server
that drips); a failed or late delivery is a warning naming the target by its number and
service, never by its URL (tokens live in URLs), and its ledger entries stay as they were so
the same news goes out at the next round.

Messages hold only the rows' own text (made safe by Result) and `[serve] public_url`: no part
of any URL, no control character. A service whose native format is markup (e-mail's HTML,
Matrix's or Discord's Markdown) gets Markdown, with the rows' text escaped, which Apprise turns
into its format; every other service gets plain text.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fleetcheck.core import stderr
from fleetcheck.core.model import Report, Result, Status, Strength, place
from fleetcheck.core.safe_text import one_line
from fleetcheck.files import LockedJson, read_document, replace_private
from fleetcheck.iso import iso_utc, parse_iso
from fleetcheck.rounds.notify_targets import Settings, Target, captured, load_apprise

FORGET_AFTER = timedelta(days=30)  # a told row not seen this long is dropped from the ledger
SECTIONS = (
    ("new", "New problems"),
    ("flapping", "Flapping"),
    ("reminder", "Still failing (reminder)"),
    ("recovered", "Recovered"),
)


# ---------------------------------------------------------------- what to say (pure)


@dataclass(frozen=True)
class Item:
    """One line of a message: a row, or several rows of one cause."""

    status: str
    subject: str  # "mini broker_link", or "12 rows" for a cause
    text: str  # the reason (or the cause)
    since: str | None = None
    strength: str | None = None
    note: str = ""  # "was WARN", "no longer flapping", "CRIT for 3h"
    link: str | None = None


@dataclass(frozen=True)
class Message:
    title: str
    sections: tuple[tuple[str, tuple[Item, ...]], ...]
    footer: str

    def text(self) -> str:
        return self._body(markup=False)

    def markdown(self) -> str:
        return self._body(markup=True)

    def _body(self, markup: bool) -> str:
        """Plain text, or Markdown with the rows' text escaped and each link after its row."""
        out: list[str] = []
        for heading, items in self.sections:
            out += [f"**{heading}**", ""] if markup else [f"{heading}:"]
            for it in items:
                line = _md(_item_text(it)) if markup else _item_text(it)
                if it.link:
                    line += f" ([details]({it.link}))" if markup else f"\n  {it.link}"
                out.append("- " + line)
            out.append("")
        out.append(_md(self.footer) if markup else self.footer)
        return "\n".join(out)


def _item_text(it: Item) -> str:
    parts = []
    if it.since:
        parts.append(f"since {_when(it.since)}")
    if it.strength:
        words = Strength(it.strength).words
        parts.append(f"evidence: {it.strength}" + (f", {words}" if words else ""))
    if it.note:
        parts.append(it.note)
    tail = f" ({'; '.join(parts)})" if parts else ""
    return one_line(f"{it.status} {it.subject}: {it.text}{tail}")


def _when(iso: str) -> str:
    try:
        return parse_iso(iso).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return iso


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")


def _md(text: str) -> str:
    """Text as Markdown that shows as itself (a host's reason could hold markup)."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def _entry(r: Result, since: str | None, now: str, flapping: bool = False) -> dict[str, Any]:
    return {
        "status": r.status.label,
        "since": since or now,
        "sent": now,
        "seen": now,
        "flapping": flapping,
        "summary": r.summary,
    }


def _link(public_url: str | None, r: Result | None) -> str | None:
    if not public_url:
        return None
    base = public_url.rstrip("/")
    if r is None:
        return base + "/"
    query = {"check": r.check, "host": r.host or ""}
    if r.item is not None:
        query["item"] = r.item
    return f"{base}/row?" + urlencode(query)


def plan(
    report: Report,
    told: Mapping[str, Any],
    target: Target,
    remind_every: float,
    public_url: str | None = None,
    groups_of: Mapping[str, tuple[str, ...]] | None = None,
) -> tuple[Message | None, dict[str, Any]]:
    """(the message for `target`, None when nothing changed for it; its new ledger entries),
    judged at the report's own time (so the test clock drives reminders)."""
    groups_of = groups_of or {}
    now_text = report.started_at
    now = parse_iso(now_text)
    news: dict[str, list[tuple[Result, str]]] = {k: [] for k, _ in SECTIONS}
    new_told: dict[str, Any] = {}
    failing: list[Result] = []
    silenced = 0
    current = {r.id: r for r in report.results}
    for key, r in current.items():
        prev = told.get(key)
        wanted = target.wants_place(r, groups_of)
        if not wanted:
            continue  # never told (or no longer wanted: forgotten quietly)
        standing = report.standing_of(r)
        if standing.silenced is not None:
            # nothing said while it lasts, and forgotten: a row still bad when its silence
            # ends is news again
            silenced += 1
            continue
        problem = standing.pages(r.status) and r.status.label in target.statuses
        if problem:
            failing.append(r)
        since = standing.since
        if standing.flapping:
            if prev is not None and prev.get("flapping"):
                new_told[key] = {**prev, "seen": now_text}
            elif problem or prev is not None or r.status is Status.OK:
                news["flapping"].append((r, "changes status often: told once"))
                new_told[key] = _entry(r, since, now_text, flapping=True)
            continue
        if not problem:
            if prev is not None:
                was = str(prev.get("status"))
                note = "stopped flapping" if prev.get("flapping") else f"was {was}"
                news["recovered"].append((r, note))
            continue
        if prev is None or prev.get("flapping") or prev.get("status") != r.status.label:
            note = "" if prev is None else f"was {prev.get('status')}"
            if prev is not None and prev.get("flapping"):
                note = "no longer flapping"
            news["new"].append((r, note))
            new_told[key] = _entry(r, since, now_text)
        elif remind_every > 0 and now - _parsed(prev.get("sent"), now) >= timedelta(
            seconds=remind_every
        ):
            news["reminder"].append((r, ""))
            new_told[key] = {**_entry(r, since, now_text), "since": prev.get("since") or now_text}
        else:
            new_told[key] = {**prev, "seen": now_text, "summary": r.summary}
    for key, prev in told.items():
        if key not in current and now - _parsed(prev.get("seen"), now) < FORGET_AFTER:
            new_told[key] = prev  # not checked this round (--only, --host): kept, not resolved
    if not any(news.values()):
        return None, new_told
    sections = []
    for kind, heading in SECTIONS:
        if news[kind]:
            sections.append((heading, tuple(_items(report, news[kind], kind, public_url))))
    return Message(_title(news, failing), tuple(sections), _footer(failing, silenced)), new_told


def _parsed(text: Any, default: datetime) -> datetime:
    try:
        return parse_iso(text)
    except (ValueError, TypeError):
        return default


def _items(
    report: Report, rows: list[tuple[Result, str]], kind: str, public_url: str | None
) -> Iterable[Item]:
    """Rows as lines: those of one cause (and one status) as one line, the rest one each."""
    by_cause: dict[tuple[str, str], list[tuple[Result, str]]] = {}
    alone: list[tuple[Result, str]] = []
    for r, note in rows:
        if r.cause and kind != "recovered":
            by_cause.setdefault((r.cause, r.status.label), []).append((r, note))
        else:
            alone.append((r, note))
    out: list[tuple[int, Item]] = []
    for (cause, status), group in by_cause.items():
        if len(group) == 1:
            alone.append(group[0])
            continue
        hosts = sorted({place(r.host) for r, _ in group})
        shown = ", ".join(hosts[:5]) + (f" and {len(hosts) - 5} more" if len(hosts) > 5 else "")
        first = group[0][0]
        since = min((s for r, _ in group if (s := report.standing_of(r).since)), default=None)
        item = Item(
            status,
            f"{len(group)} rows",
            f"{cause} (on {shown})",
            since=since,
            strength=first.evidence_strength,
            link=_link(public_url, None),
        )
        out.append((-Status.parse(status).rank, item))
    for r, note in alone:
        status = r.status.label
        item = Item(
            status,
            f"{place(r.host)} {r.label}",
            r.summary,
            since=report.standing_of(r).since if kind != "recovered" else None,
            strength=r.evidence_strength if r.status is not Status.OK else None,
            note=note,
            link=_link(public_url, r),
        )
        out.append((-r.status.rank, item))
    out.sort(key=lambda pair: (pair[0], pair[1].subject))
    return [item for _, item in out]


def _title(news: Mapping[str, list[Any]], failing: list[Result]) -> str:
    parts = []
    for kind, word in (("new", "new"), ("flapping", "flapping"), ("reminder", "still failing")):
        if news[kind]:
            parts.append(f"{len(news[kind])} {word}")
    if news["recovered"]:
        parts.append(f"{len(news['recovered'])} recovered")
    worst = max((r.status for r in failing), key=lambda s: s.rank, default=Status.OK)
    return f"fleetcheck {worst.label}: " + ", ".join(parts)


def _footer(failing: list[Result], silenced: int) -> str:
    counts: dict[str, int] = {}
    for r in failing:
        counts[r.status.label] = counts.get(r.status.label, 0) + 1
    quiet = f"; {silenced} silenced" if silenced else ""
    if not failing:
        return f"Nothing is failing now{quiet}."
    detail = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=_by_rank))
    noun = "row" if len(failing) == 1 else "rows"
    return f"Failing now: {len(failing)} {noun} ({detail}){quiet}."


def _by_rank(pair: tuple[str, int]) -> int:
    return -Status.parse(pair[0]).rank


# ---------------------------------------------------------------- delivering


@dataclass(frozen=True)
class Outcome:
    target: Target
    error: str | None  # None: delivered

    @property
    def line(self) -> str:
        if self.error is None:
            return f"{self.target.name}: delivered"
        return f"{self.target.name}: not delivered: {self.error}"


def send(
    targets: Iterable[tuple[Target, Message]],
    timeout: float,
) -> list[Outcome]:
    """Deliver each message to its target, all at once, each within `timeout` seconds in all
    (a late one is left behind in its daemon thread: it can cost no more than that)."""
    apprise = load_apprise()
    jobs = []
    for target, message in targets:
        result: list[str | None] = []
        worker = threading.Thread(
            target=_deliver,
            args=(apprise, target, message, timeout, result),
            name=f"fleetcheck {target.name}",
            daemon=True,
        )
        jobs.append((target, worker, result))
        worker.start()
    deadline = time.monotonic() + timeout
    outcomes = []
    for target, worker, result in jobs:
        worker.join(max(0.0, deadline - time.monotonic()))
        # Apprise's socket timeouts are capped at the bound: a failure that ends at the
        # deadline is the bound's, whichever of the two threads saw it first
        late = time.monotonic() >= deadline
        if not result or (result[0] is not None and late):
            outcomes.append(Outcome(target, f"timed out after {timeout:g}s"))
        else:
            outcomes.append(Outcome(target, result[0]))
    return outcomes


def _deliver(
    apprise: Any, target: Target, message: Message, timeout: float, result: list[str | None]
) -> None:
    ident = threading.get_ident()
    captured[ident] = []
    try:
        plugin = apprise.Apprise.instantiate(target.url)
        if plugin is None:
            result.append("Apprise cannot use this URL")
            return
        plugin.socket_connect_timeout = min(float(plugin.socket_connect_timeout), timeout)
        plugin.socket_read_timeout = min(float(plugin.socket_read_timeout), timeout)
        markup = _native(plugin, apprise)
        body = message.markdown() if markup else message.text()
        fmt = apprise.NotifyFormat.MARKDOWN if markup else apprise.NotifyFormat.TEXT
        ok = plugin.notify(body=body, title=message.title, body_format=fmt)
        if ok:
            result.append(None)
        else:
            result.append(_reason(captured.get(ident, []), target.url))
    except Exception as e:  # a plugin's own failure: one line, no traceback, no secret
        result.append(f"{type(e).__name__} in the {target.service} plugin")
    finally:
        captured.pop(ident, None)


def _native(plugin: Any, apprise: Any) -> bool:
    """Whether the service's own format is markup (Markdown or HTML)."""
    formats = plugin.notify_format
    first = formats[0] if isinstance(formats, tuple | list) else formats
    return first in (apprise.NotifyFormat.MARKDOWN, apprise.NotifyFormat.HTML)


def _reason(lines: list[str], url: str) -> str:
    """Apprise's last warning about the failure, every piece of the URL taken out of it
    (Apprise masks what it knows is secret; the rest of the URL can be a token too)."""
    text = lines[-1] if lines else "the service did not accept it"
    return scrub(text, url)[:200]


def scrub(text: str, url: str) -> str:
    """`text` with each piece of `url` after its scheme (user, password, host, path parts,
    query values) of 3 characters or more replaced by `***`, and made one safe line."""
    rest = url.split("://", 1)[-1]
    pieces = sorted(
        {p for p in re.split(r"[/:@?&=#,]+", rest) if len(p) >= 3}, key=len, reverse=True
    )
    for piece in pieces:
        text = text.replace(piece, "***")
        from urllib.parse import quote, unquote

        for variant in {quote(piece, safe=""), unquote(piece)}:
            if len(variant) >= 3:
                text = text.replace(variant, "***")
    return one_line(text)


# ---------------------------------------------------------------- the ledger
# What each target has been told, per row (status, since, last told, flapping told), in a file
# beside the state file: cron runs are separate processes. Keyed by a digest of the target's
# URL (it carries tokens and never reaches a file); a target's entries change only after a
# delivery to it succeeded, so a failed one is sent again. Atomic, private, locked for the whole
# round; an unreadable file is moved aside with one warning (worst case: a repeated message).
LEDGER_SCHEMA = "fleetcheck.notify/1"


def target_key(url: str) -> str:
    """A target's name in the ledger: a digest of its URL (changing the URL starts afresh)."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def ledger_path(state: Path) -> Path:
    """The ledger of a state file: next to it, named after it."""
    return state.with_name(state.stem + ".notify.json")


def entry_problem(entry: Any) -> str | None:
    """Why a ledger entry cannot be used (None when it can)."""
    if not isinstance(entry, dict):
        return "not an object"
    for key in ("status", "sent", "seen"):
        if not isinstance(entry.get(key), str):
            return key
    if not isinstance(entry.get("flapping", False), bool):
        return "flapping"
    return None


class Ledger(LockedJson):
    """The ledger file: `locked()` yields {target key: {row key: entry}} and saves it."""

    schema = LEDGER_SCHEMA

    def _load(self) -> dict[str, Any]:
        targets = read_document(self.path, LEDGER_SCHEMA, "notify ledger", "targets", dict) or {}
        out: dict[str, dict[str, Any]] = {}
        for key, rows in targets.items():
            if isinstance(rows, dict):
                out[key] = {k: v for k, v in rows.items() if entry_problem(v) is None}
        return out

    def _save(self, targets: dict[str, Any]) -> None:
        text = json.dumps({"schema": LEDGER_SCHEMA, "targets": targets}, indent=1, sort_keys=True)
        replace_private(self.path, text)


# ---------------------------------------------------------------- one round


def after_round(
    report: Report,
    settings: Settings,
    ledger: Path,
    warn: Callable[[str], None] = stderr.warn,
) -> list[Outcome]:
    """Plan each target's message from the ledger, deliver them, and record what was told
    (a target whose delivery failed keeps its old entries: the news is sent again next round).
    The ledger stays locked during the delivery (at most `timeout`), so two overlapping runs
    never both send the same news."""
    book = Ledger(ledger)
    outcomes: list[Outcome] = []
    with book.locked() as told:
        plans: list[tuple[Target, Message]] = []
        updates: dict[str, dict[str, Any]] = {}
        for target in settings.targets:
            key = target_key(target.url)
            message, entries = plan(
                report,
                told.get(key, {}),
                target,
                settings.remind_every,
                settings.public_url,
                settings.groups_of,
            )
            if message is None:
                told[key] = entries
            else:
                plans.append((target, message))
                updates[key] = entries
        if plans:
            outcomes = send(plans, settings.timeout)
        for outcome in outcomes:
            if outcome.error is None:
                told[target_key(outcome.target.url)] = updates[target_key(outcome.target.url)]
            else:
                warn(f"{outcome.line}; sent again at the next round")
    return outcomes


def test_message(host: str) -> Message:
    """What `fleetcheck notify --test` sends."""
    item = Item("OK", "fleetcheck", f"test message from {host}: this target is reachable")
    now = iso_utc(datetime.now().astimezone())
    return Message(
        "fleetcheck: test message",
        (("Test", (item,)),),
        f"Sent {_when(now)}.",
    )
