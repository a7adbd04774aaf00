"""Parsers fuzzed with hypothesis. Each test states a property: the parser returns a value or
raises only its documented error (anything else fails the test), and what a writer produces
reads back as what was written (round trips)."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fleetcheck.config import ConfigError, FleetConfig, from_dict
from fleetcheck.core import registry
from fleetcheck.parse.clientlist import normalise_ip, parse_client_list, split_addr
from fleetcheck.parse.duration import format_duration, parse_duration
from fleetcheck.parse.gathered import parse_gathered

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.one_of(st.text(max_size=40), st.integers(), st.floats(), st.booleans(), st.none()))
def test_duration_value_or_valueerror(value: Any) -> None:
    try:
        seconds = parse_duration(value)
    except ValueError as e:
        assert str(e).startswith(f"bad duration {value!r}: ")
        return
    assert 0 <= seconds < float("inf")
    if isinstance(value, int | float) and not isinstance(value, bool):
        assert seconds == float(value)  # a number is seconds


UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


@FUZZ
@given(
    st.lists(
        st.tuples(st.integers(0, 9999), st.sampled_from(sorted(UNITS))), min_size=1, max_size=4
    ),
    st.booleans(),
)
def test_duration_is_the_sum_of_its_parts(parts: list[tuple[int, str]], shout: bool) -> None:
    text = "".join(f"{n}{unit}" for n, unit in parts)
    if shout:  # case and spaces do not matter
        text = " ".join(text.upper())
    assert parse_duration(text) == pytest.approx(sum(n * UNITS[u] for n, u in parts))


@FUZZ
@given(st.floats(min_value=0, max_value=10**8, allow_nan=False))
def test_formatted_duration_reads_back_within_its_resolution(seconds: float) -> None:
    text = format_duration(seconds)
    assert " " not in text
    # the text keeps tenths below 10s, seconds below 1h, minutes below 1d, hours above
    if seconds < 10:
        resolution = 0.5 if seconds == int(seconds) else 0.05
    elif seconds < 3600:
        resolution = 0.5
    elif seconds < 86400:
        resolution = 60.5
    else:
        resolution = 3600.5
    assert abs(parse_duration(text) - seconds) <= resolution + 1e-9, text


_token = st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=30)


@FUZZ
@given(st.lists(st.lists(st.tuples(_token, _token), max_size=12), max_size=20))
def test_client_list_never_crashes(lines: list[list[tuple[str, str]]]) -> None:
    text = "\n".join(" ".join(f"{k}={v}" for k, v in line) for line in lines)
    clients = parse_client_list(text)
    # one client per line that has an addr= field, never more
    assert len(clients) <= sum(1 for line in text.splitlines() if "addr=" in line)


_value_text = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=12)
_address = st.one_of(
    st.tuples(st.ip_addresses(v=4).map(str), st.integers(1, 65535)).map(
        lambda t: (f"{t[0]}:{t[1]}", t[0], t[1])
    ),
    st.tuples(st.ip_addresses(v=6).map(str), st.integers(1, 65535)).map(
        lambda t: (f"[{t[0]}]:{t[1]}", t[0], t[1])
    ),
)


@FUZZ
@given(
    st.lists(
        st.tuples(st.integers(0, 2**40), _address, _value_text, st.integers(0, 10**7)),
        max_size=15,
    ),
    st.booleans(),
)
def test_client_list_round_trips(
    rows: list[tuple[int, tuple[str, str, int], str, int]], ragged: bool
) -> None:
    """What a server writes (the real field order; `ragged` adds a field to one line, which
    takes the line-by-line path) reads back field for field."""
    lines = [
        f"id={i} addr={addr} laddr=127.0.0.1:6379 fd=8 name={name} age={age} idle=0 "
        "flags=N db=0 cmd=client|list"
        for i, (addr, _, _), name, age in rows
    ]
    if ragged and lines:
        lines[0] += " lib-name=redis-py"
    clients = parse_client_list("\n".join(lines) + "\n")
    assert [(c.id, c.host, c.port, c.name, c.age_s, c.cmd) for c in clients] == [
        (i, normalise_ip(host), port, name, age, "client|list")
        for i, (_, host, port), name, age in rows
    ]


@FUZZ
@given(st.text(max_size=60))
def test_split_addr_never_crashes(addr: str) -> None:
    host, port = split_addr(addr)
    assert port is None or (0 <= port and str(port) in addr)


@FUZZ
@given(st.ip_addresses(), st.integers(0, 65535))
def test_split_addr_round_trips(ip: Any, port: int) -> None:
    host = str(ip)
    assert split_addr(f"{host}:{port}") == (normalise_ip(host), port)  # old servers: no brackets
    if ":" in host:
        assert split_addr(f"[{host}]:{port}") == (normalise_ip(host), port)


_nonce = st.text(alphabet="0123456789abcdef", min_size=4, max_size=16)


@FUZZ
@given(st.binary(max_size=400), _nonce)
def test_gathered_output_never_crashes(out: bytes, nonce: str) -> None:
    fragments, epoch = parse_gathered(nonce, out)
    marker = f"@@{nonce} ".encode()
    if marker not in out:
        assert fragments == {} and epoch is None


@FUZZ
@given(
    st.dictionaries(
        st.from_regex(r"[A-Za-z0-9_.:-]{1,12}", fullmatch=True),
        st.tuples(st.binary(max_size=200), st.integers(0, 255)),
        max_size=6,
    ),
    _nonce,
    st.floats(min_value=0, max_value=4e9, allow_nan=False),
)
def test_gathered_output_round_trips(
    written: dict[str, tuple[bytes, int]], nonce: str, epoch: float
) -> None:
    """Output framed as build_gather_script's printf lines frame it reads back per key,
    whatever bytes each fragment printed (short of the nonce itself)."""
    assume(all(f"@@{nonce}".encode() not in out for out, _ in written.values()))
    framed = f"@@{nonce} clock {epoch!r}\n".encode()
    for key, (out, rc) in written.items():
        framed += f"@@{nonce} begin {key}\n".encode() + out
        framed += f"\n@@{nonce} end {key} {rc}\n".encode()
    fragments, got_epoch = parse_gathered(nonce, framed)
    assert got_epoch == epoch
    assert {k: (f.output, f.rc) for k, f in fragments.items()} == written


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
        fleet = from_dict(doc, "fuzz.toml", registry.config_type, registry.host_config_types)
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
        from_dict(doc, "fuzz.toml", registry.config_type, registry.host_config_types)
    except ConfigError as e:
        assert str(e).startswith("fuzz.toml: ") and "\n" not in str(e)


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
        lambda: route_parse.parse_ip_batch(text),
        lambda: route_parse.parse_ip_batch(f"route4 route6 rules\n{raw}\n{text}"),
        lambda: route_parse.parse_gathered(f"@@ip route4 addr\n{raw}\n{text}", None),
    ):
        try:
            fn()
        except route_parse.RouteParseError:
            pass
