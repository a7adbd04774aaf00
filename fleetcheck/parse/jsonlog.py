"""JSON-lines logs (structlog, pino, bunyan, zap, Docker's json-file, ...): one JSON object per
line; where its time and its severity are. Pure.

The time is the first present of TIME_FIELDS (or only the configured `time_field`, a dotted
path): ISO 8601 with or without a zone (naive: the host's `tz` applies, as for text logs), or
epoch seconds to nanoseconds told apart by magnitude (`epoch_unit`; the units cannot overlap
for any time this tool will see). The severity is the first present level field, by name or
number (bunyan/pino >= 50, syslog 0-3); a line without one is judged by the error regex."""

from __future__ import annotations

import json
import re
from itertools import islice
from typing import Any

from fleetcheck.parse.logformats.fields import NUMERIC, epoch_stamp, epoch_unit
from fleetcheck.parse.timestamps import Stamp, find_stamp

__all__ = ["epoch_stamp", "epoch_unit"]  # read here by the tests of JSON times

TIME_FIELDS = ("time", "ts", "timestamp", "@timestamp", "t")
LEVEL_FIELDS = ("level", "severity", "lvl", "levelname", "log.level")
MESSAGE_FIELDS = ("msg", "message", "log", "MESSAGE", "event")
ERROR_NAMES = frozenset("error err fatal critical crit panic dpanic alert emerg emergency".split())


def parse_object(line: str) -> dict[str, Any] | None:
    """The line as a JSON object, or None (not JSON, or JSON that is not an object)."""
    s = line.strip()
    if not s.startswith("{"):
        return None
    try:
        value = json.loads(s)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        return None
    return value if isinstance(value, dict) else None


def _lookup(obj: dict[str, Any], name: str) -> Any:
    """obj[name], else the dotted path into nested objects (`log.level`, `meta.time`)."""
    if name in obj:
        return obj[name]
    node: Any = obj
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def value_stamp(value: Any) -> Stamp | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return epoch_stamp(value)
    if isinstance(value, dict) and "$date" in value:  # MongoDB
        return value_stamp(value["$date"])
    if isinstance(value, str):
        if NUMERIC.fullmatch(value):
            return epoch_stamp(value)
        stamp = find_stamp(value)
        if stamp is not None and stamp.kind != "epoch":
            return stamp
    return None


def object_stamp(obj: dict[str, Any], time_field: str | None = None) -> Stamp | None:
    """The record's time: the configured field only, else the first present default field."""
    for name in (time_field,) if time_field else TIME_FIELDS:
        value = _lookup(obj, name)
        if value is not None:
            return value_stamp(value)
    return None


def level_is_error(value: Any) -> bool | None:
    """True/False for a recognised level value, None for something that is not a level."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return value >= 50 or 0 <= value <= 3
    if isinstance(value, str):
        name = value.strip().lower()
        return name in ERROR_NAMES if name else None
    return None


def object_level(obj: dict[str, Any]) -> bool | None:
    """Whether the record's level is an error; None when it carries no level."""
    for name in LEVEL_FIELDS:
        verdict = level_is_error(_lookup(obj, name))
        if verdict is not None:
            return verdict
    inner = obj.get("log")  # Docker json-file wrapping a JSON-lines program's output
    if isinstance(inner, str) and inner.lstrip().startswith("{"):
        nested = parse_object(inner)
        if nested is not None:
            return object_level(nested)
    return None


def is_error(obj: dict[str, Any], line: str, error_regex: re.Pattern[str]) -> bool:
    """By level when the record has one; else the error regex on its message (the whole
    line when it has none)."""
    verdict = object_level(obj)
    if verdict is not None:
        return verdict
    message = next((v for n in MESSAGE_FIELDS if isinstance(v := obj.get(n), str)), line)
    return bool(error_regex.search(message))


def looks_like_json(lines: list[str], sample: int = 20) -> bool:
    """Detection for logs without `format`: most of the last `sample` non-blank lines are
    JSON objects."""
    recent = list(islice((line for line in reversed(lines) if line.strip()), sample))
    hits = sum(parse_object(line) is not None for line in recent)
    return bool(recent) and hits * 2 > len(recent)
