"""The generic builder: a TOML table into a config dataclass by its annotations, rejecting
unknown keys and wrong types; every error names file, table and key."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from contextvars import ContextVar
from functools import cache
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints

from fleetcheck.config.values import (
    DURATION,
    IP_ADDRESS,
    MAX_DURATION,
    MAX_DURATION_TEXT,
    ConfigError,
    InvalidValue,
    ip_address_problem,
)
from fleetcheck.parse.duration import parse_duration


@cache
def hints_of(cls: type) -> dict[str, Any]:
    """A config class's resolved annotations: resolving them evaluates each string again,
    and a fleet builds the same few classes once per host."""
    return get_type_hints(cls, include_extras=True)


def build(
    cls: type, data: Any, file: str, table: str, sources: Mapping[str, str] | None = None
) -> Any:
    """Build dataclass `cls` from a TOML table, rejecting unknown keys and wrong types.
    `sources` says where a host's merged keys were written ([defaults], [groups.NAME])."""
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: [{table}] must be a table, not {kind_of(data)}")
    hints = hints_of(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and f.metadata.get("key", True)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{file}: [{table}] {unknown[0]}: unknown key (known keys: {', '.join(fields)})"
        )
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = convert(data[name], hints[name], file, table, name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{file}: [{table}] {name}: missing (required)")
    try:
        return cls(**kwargs)
    except InvalidValue as e:
        raise ConfigError(placed(file, table, e, sources or {})) from None


BARE_DURATIONS: ContextVar[list[tuple[str, str, str]] | None] = ContextVar(
    "bare_durations", default=None
)


def kind_of(value: Any) -> str:
    return {dict: "a table", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), f"a {type(value).__name__}"
    )


# a scalar type: the TOML values it takes (never a boolean for a number) and how errors name it
SCALARS: dict[type, tuple[Any, str]] = {
    bool: (bool, "true or false"),
    int: (int, "a whole number"),
    float: (int | float, "a number"),
    str: (str, "a string"),
}


def convert(value: Any, hint: Any, file: str, table: str, key: str) -> Any:
    def fail(expected: str) -> ConfigError:
        return ConfigError(f"{file}: [{table}] {key}: expected {expected}, got {value!r}")

    origin = get_origin(hint)
    if origin is Annotated:
        base, *meta = get_args(hint)
        if DURATION in meta:
            try:
                seconds = parse_duration(value)
            except ValueError as e:
                raise ConfigError(f"{file}: [{table}] {key}: {e}") from None
            if seconds > MAX_DURATION:
                raise ConfigError(
                    f"{file}: [{table}] {key}: {value!r} is longer than {MAX_DURATION_TEXT}, "
                    "the bound on any duration"
                )
            bare = BARE_DURATIONS.get()
            if bare is not None and not isinstance(value, str):
                note = f"[{table}] {key} {value:g}s (a bare number means seconds)"
                bare.append((table, key, note))
            return seconds
        converted = convert(value, base, file, table, key)
        if IP_ADDRESS in meta:
            problem = ip_address_problem(converted)
            if problem is not None:
                raise ConfigError(f"{file}: [{table}] {key}: {problem}")
        return converted
    if origin in (typing.Union, types.UnionType):
        options = [a for a in get_args(hint) if a is not type(None)]
        errors: list[ConfigError] = []
        for option in options:
            try:
                return convert(value, option, file, table, key)
            except ConfigError as e:
                # a list's error from the list option ("known_hosts[0]: ..."), not "a string"
                if isinstance(value, list) and get_origin(option) is tuple:
                    errors.insert(0, e)
                else:
                    errors.append(e)
        raise errors[0]
    if origin is Literal:
        if value not in get_args(hint):
            raise fail("one of " + ", ".join(repr(a) for a in get_args(hint)))
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise fail("a list")
        (item,) = get_args(hint)[:1]
        out = []
        for i, v in enumerate(value):
            if dataclasses.is_dataclass(item):
                out.append(build(item, v, file, f"{table}.{key}[{i}]"))  # type: ignore[arg-type]
            else:
                out.append(convert(v, item, file, table, f"{key}[{i}]"))
        return tuple(out)
    if origin is dict:
        if not isinstance(value, dict):
            raise fail("a table")
        _, vt = get_args(hint)
        return {k: convert(v, vt, file, table, f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return build(hint, value, file, f"{table}.{key}")  # type: ignore[arg-type]
    if hint in SCALARS:
        takes, expected = SCALARS[hint]
        if not isinstance(value, takes) or (isinstance(value, bool) and hint is not bool):
            raise fail(expected)
        return float(value) if hint is float else value
    if hint is Any:
        return value
    raise TypeError(f"config field type {hint!r} is not supported by the builder")


def top_key(note: tuple[str, str, str], label: str) -> str:
    table, key, _ = note
    if table == label:
        return key
    return re.split(r"[.\[]", table[len(label) + 1 :], maxsplit=1)[0]


def placed(file: str, label: str, e: InvalidValue, sources: Mapping[str, str]) -> str:
    """The message for a host's invalid value, naming the table it was written in."""
    where = sources.get(re.split(r"[.\[]", e.key, maxsplit=1)[0], "hosts")
    if where == "hosts":
        return f"{file}: [{label}] {e.key}: {e.message}"
    return f"{file}: [{where}] {e.key}: {e.message} (for host {label.split(' ')[-1]})"
