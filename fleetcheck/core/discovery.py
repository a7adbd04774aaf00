"""What `fleetcheck config discover` saw on the broker (`Sample`), which each check turns into
its `[checks.NAME]` table (`Check.discover_draft`) with the guessers here (which hash looks
like a live hash, which lists like queues) and the TOML quoting every draft uses. Pure."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fleetcheck.core.safe_text import printable
from fleetcheck.iso import parse_iso
from fleetcheck.parse.clientlist import Client

LIVE_WORDS = ("live", "running", "active", "inflight", "in_flight", "current", "matches")
QUEUE_WORDS = ("queue", "inbox", "jobs", "tasks", "pending", "processing", "work", "backlog")
TIME_FIELDS = ("started_at", "started", "start", "start_time", "started_ts", "ts", "since")
OWNER_FIELDS = ("host", "owner", "worker", "hostname", "node", "machine")
TODO = "TODO"


@dataclass(frozen=True)
class Draft:
    """A check's part of the draft: its lines (a table, or a comment saying why none) and
    the broker keys it proposes (the draft's list of keys seen marks the others)."""

    lines: tuple[str, ...]
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class KeyInfo:
    key: str
    type: str  # "hash" or "list"
    size: int
    sample: tuple[str, ...] = ()  # at most a few values (hash) or the head element (list)


@dataclass(frozen=True)
class LiveGuess:
    key: str
    started_field: str
    owner_field: str | None


def _looks_like_time(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return 1e9 <= value <= 1e10 or 1e12 <= value <= 1e13  # epoch seconds or ms
    if isinstance(value, str):
        try:
            parse_iso(value)
            return True
        except ValueError:
            return False
    return False


def live_fields(samples: Iterable[str]) -> tuple[str, str | None] | None:
    """(started field, owner field) when most sampled values are JSON objects with a start
    time, else None."""
    objs = []
    for s in samples:
        try:
            v = json.loads(s)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            continue
        if isinstance(v, dict):
            objs.append(v)
    if not objs:
        return None
    for f in TIME_FIELDS:
        hits = sum(1 for o in objs if _looks_like_time(o.get(f)))
        if hits * 2 > len(objs):
            owner = next((o for o in OWNER_FIELDS if all(o in x for x in objs)), None)
            return f, owner
    return None


def _has_word(key: str, words: Iterable[str]) -> bool:
    parts = set(re.split(r"[^a-z0-9_]+", key.lower()))
    return any(w in parts or any(p.startswith(w) for p in parts) for w in words)


def live_hash_guess(keys: Iterable[KeyInfo]) -> LiveGuess | None:
    """The hash that looks most like the live hash: its sample has start times; a live-ish
    name and size break ties."""
    best: tuple[tuple[int, int], LiveGuess] | None = None
    for k in keys:
        if k.type != "hash":
            continue
        found = live_fields(k.sample)
        if found is None:
            continue
        score = (1 if _has_word(k.key, LIVE_WORDS) else 0, k.size)
        if best is None or score > best[0]:
            best = (score, LiveGuess(k.key, found[0], found[1]))
    return best[1] if best else None


def queue_guesses(keys: Iterable[KeyInfo]) -> list[KeyInfo]:
    """Lists that look like queues: a queue-like name, or a JSON object at the head."""
    out = []
    for k in keys:
        if k.type != "list":
            continue
        head_json = False
        if k.sample:
            try:
                head_json = isinstance(json.loads(k.sample[0]), dict)
            except (ValueError, RecursionError):
                pass
        if _has_word(k.key, QUEUE_WORDS) or head_json:
            out.append(k)
    return sorted(out, key=lambda k: k.key)


@dataclass(frozen=True)
class Sample:
    clients: list[Client]  # everything but our own connection
    info: dict[str, Any]
    keys: list[KeyInfo]  # hashes and lists seen by the bounded SCAN
    scanned: int  # keys the SCAN looked at
    complete: bool  # the SCAN reached the end of the keyspace
    db_keys: int | None  # keys in the database, from INFO keyspace
    # queue keys their consumers or a known framework's own keys name, empty ones included:
    # {key: why}
    consumer_queues: dict[str, str] = field(default_factory=dict)


def toml_str(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's, for every code point)."""
    return json.dumps(text, ensure_ascii=True)


def comment(text: str) -> str:
    """Text safe inside a TOML comment: one line, no control characters (`printable`'s
    visible escapes, then `?` for anything else a terminal would not show as itself)."""
    return "".join(ch if ch.isprintable() else "?" for ch in printable(text))
