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
