"""Parsers fuzzed with hypothesis: a value or a clean error, never a crash or a hang."""

from __future__ import annotations

import tomllib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetcheck import registry
from fleetcheck.config import ConfigError, FleetConfig, from_dict
from fleetcheck.context import parse_gathered
from fleetcheck.parse.clientlist import parse_client_list, split_addr
from fleetcheck.parse.duration import format_duration, parse_duration

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.one_of(st.text(max_size=40), st.integers(), st.floats(), st.booleans(), st.none()))
def test_duration_value_or_valueerror(value: Any) -> None:
    try:
        seconds = parse_duration(value)
    except ValueError:
        return
    assert seconds >= 0 and seconds != float("inf")
    format_duration(seconds)


@FUZZ
@given(st.from_regex(r"(\d{1,4}(ms|s|m|h|d)){1,4}", fullmatch=True))
def test_duration_grammar_always_parses(text: str) -> None:
    assert parse_duration(text) >= 0


_token = st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=30)


@FUZZ
@given(st.lists(st.lists(st.tuples(_token, _token), max_size=12), max_size=20))
def test_client_list_never_crashes(lines: list[list[tuple[str, str]]]) -> None:
    text = "\n".join(" ".join(f"{k}={v}" for k, v in line) for line in lines)
    for client in parse_client_list(text):
        assert isinstance(client.host, str)


@FUZZ
@given(st.text(max_size=60))
def test_split_addr_never_crashes(addr: str) -> None:
    host, port = split_addr(addr)
    assert port is None or port >= 0


@FUZZ
@given(st.binary(max_size=400), st.text(alphabet="0123456789abcdef", min_size=4, max_size=16))
def test_gathered_output_never_crashes(out: bytes, nonce: str) -> None:
    parse_gathered(nonce, out)


# Config: random tables built from the real key names, so the fuzzer reaches deep validation.
_keys = st.sampled_from(
    [
        "url",
        "name",
        "ssh",
        "addrs",
        "tz",
        "logs",
        "path",
        "max_age",
        "min_clients",
        "every",
        "deadline",
        "user",
        "port",
        "connect_timeout",
        "cap",
        "keys",
        "bogus",
    ]
)
_scalar = st.one_of(
    st.text(max_size=12),
    st.integers(-5, 10**6),
    st.booleans(),
    st.floats(allow_nan=True),
    st.sampled_from(["15m", "1h30m", "UTC", "auto", "America/New_York", "redis://h:1/0", "local"]),
)
_value = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=12,
)
_doc = st.fixed_dictionaries(
    {},
    optional={
        "broker": st.dictionaries(_keys, _value, max_size=4),
        "ssh": st.dictionaries(_keys, _value, max_size=3),
        "patrol": st.dictionaries(_keys, _value, max_size=3),
        "hosts": st.lists(st.dictionaries(_keys, _value, max_size=6), max_size=3),
        "checks": st.dictionaries(
            st.sampled_from(sorted(registry.available()) + ["nosuch"]),
            st.dictionaries(_keys, _value, max_size=3),
            max_size=3,
        ),
    },
)


@FUZZ
@given(_doc)
def test_config_value_or_config_error(doc: dict[str, Any]) -> None:
    try:
        fleet = from_dict(doc, "fuzz.toml", registry.config_type)
    except ConfigError as e:
        message = str(e)
        assert message.startswith("fuzz.toml: ") and "\n" not in message
        return
    assert isinstance(fleet, FleetConfig)


@FUZZ
@given(st.text(max_size=200))
def test_toml_text_value_or_error(text: str) -> None:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    try:
        from_dict(doc, "fuzz.toml", registry.config_type)
    except ConfigError:
        pass


# Log timestamps and route tables: what hosts send back is arbitrary text.
from datetime import UTC, datetime  # noqa: E402

from fleetcheck.parse import routes as route_parse  # noqa: E402
from fleetcheck.parse.instant import parse_instant  # noqa: E402
from fleetcheck.parse.timestamps import (  # noqa: E402
    FormatError,
    find_stamp,
    find_with,
    format_regex,
    resolve,
)
from fleetcheck.zones import zone_named  # noqa: E402

NOW = datetime(2026, 11, 29, 7, 0, tzinfo=UTC)
_stampish = st.one_of(
    st.text(max_size=80),
    st.from_regex(
        r"\A(\d{1,5}[-/:. T]){2,7}\d{0,9}( ?[+-]\d{2}:?\d{2}|Z)?.{0,20}\Z", fullmatch=True
    ),
    st.from_regex(r"\A[A-Z][a-z]{2} {1,2}\d{1,2} \d\d:\d\d:\d\d .{0,20}\Z", fullmatch=True),
    st.from_regex(
        r"\A\[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\].{0,10}\Z", fullmatch=True
    ),
)


@FUZZ
@given(_stampish, st.sampled_from(["UTC", "America/New_York", "Asia/Kolkata", "Europe/London"]))
def test_log_timestamps_value_or_none(line: str, zone: str) -> None:
    stamp = find_stamp(line)
    if stamp is None:
        return
    resolved = resolve(stamp, zone_named(zone), zone, NOW, hint=NOW)
    assert resolved.utc.tzinfo is not None


@FUZZ
@given(st.text(max_size=30), st.text(max_size=60))
def test_custom_formats_value_or_format_error(fmt: str, line: str) -> None:
    try:
        format_regex(fmt)
    except FormatError:
        return
    find_with(line, fmt, None)


@FUZZ
@given(
    st.one_of(
        st.text(max_size=40),
        st.integers(),
        st.integers(min_value=10**300, max_value=10**400),  # JSON ints have no size limit
        st.floats(),
        st.none(),
        st.booleans(),
    )
)
def test_instants_value_or_valueerror(value: object) -> None:
    try:
        parse_instant(value)
    except ValueError:
        pass


_json_junk = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "dst",
                    "dev",
                    "gateway",
                    "metric",
                    "flags",
                    "nexthops",
                    "table",
                    "type",
                    "ifname",
                    "addr_info",
                    "local",
                    "prefixlen",
                    "family",
                    "prefsrc",
                ]
            ),
            inner,
            max_size=6,
        ),
    ),
    max_leaves=20,
)


@FUZZ
@given(_json_junk, st.text(max_size=300))
def test_route_parsers_value_or_route_parse_error(doc: object, text: str) -> None:
    import json as _json

    raw = _json.dumps(doc)
    for fn in (
        lambda: route_parse.parse_ip_routes(raw, 4),
        lambda: route_parse.parse_ip_addr(raw),
        lambda: route_parse.parse_ip_route_get(raw),
        lambda: route_parse.parse_ip_rules(raw),
        lambda: route_parse.parse_proc_net_route(text),
        lambda: route_parse.parse_netstat(text),
        lambda: route_parse.parse_ifconfig(text),
        lambda: route_parse.parse_route_get(text),
        lambda: route_parse.parse_ip_addr_text(text),
        lambda: route_parse.parse_gathered(text, "198.18.0.1"),
    ):
        try:
            fn()
        except route_parse.RouteParseError:
            pass
