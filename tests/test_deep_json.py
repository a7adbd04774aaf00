"""Issue 22 item 6 beyond the live hash: JSON nested past the parser's depth, from a worker
(a queue's head job), a host's log line, its journal or its `ip -j` output, is that one
unreadable value with a reason, never a RecursionError that becomes "internal error" in a
check (the depth that breaks json.loads depends on the interpreter, so the test goes far past
any default)."""

from __future__ import annotations

import pytest
from fleetcheck.checks.queue_depth.check import read_head

from fleetcheck.parse.journal import parse_journal_output
from fleetcheck.parse.jsonlog import parse_object
from fleetcheck.parse.routes import RouteParseError, parse_ip_addr, parse_ip_routes

DEEP = 200_000


def test_item6_a_queue_head_nested_too_deep_is_not_json() -> None:
    head = read_head(b'{"a":' * DEEP + b"1" + b"}" * DEEP, "enqueued_at")
    assert head is not None and head.enqueued_at is None
    assert head.problem == "not JSON (nested too deep)"


def test_item6_a_log_line_nested_too_deep_is_not_an_object() -> None:
    assert parse_object('{"a":' * DEEP + "1" + "}" * DEEP) is None


def test_item6_a_journal_message_nested_too_deep_reads_as_empty() -> None:
    line = '{"__REALTIME_TIMESTAMP":"1700000000000000","MESSAGE":' + "[" * DEEP + "]" * DEEP + "}"
    read = parse_journal_output(line + "\n@@rc 0")
    assert read.times_us == (1_700_000_000_000_000,)
    assert read.newest_message == ""


@pytest.mark.parametrize("parse", [parse_ip_addr, lambda t: parse_ip_routes(t, 4)])
def test_item6_ip_json_nested_too_deep_is_a_route_parse_error(parse) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RouteParseError):
        parse("[" * DEEP + "]" * DEEP)
