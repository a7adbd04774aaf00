"""The fast paths of issue 15 against the implementations they replaced, on generated data:
the live-hash pass without a set of names (digests, exact re-read on a repeat) and the
column-wise CLIENT LIST reader (against the parser's own line-by-line fallback)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcheck.livehash import LiveReducer, LiveScan, read_live, reduce_pass
from fleetcheck.parse import clientlist
from fleetcheck.parse.clientlist import parse_client_list, read_client_table
from fleetcheck.parse.live_entry import EntryReader
from tests.lab import Lab
from tests.test_clientlist import dual_stack_server
from tests.test_live_hash import canonical, generated_replies, reference_scan


# ---------------------------------------------------------------- live hash: digest pass
def digest_pass(replies: list[list[bytes]], keep: int = 5) -> tuple[LiveScan, int]:
    """reduce_pass over recorded replies; also how many times it read them."""
    reads = [0]

    def again() -> list[list[bytes]]:
        reads[0] += 1
        return replies

    scan = reduce_pass(again, "arena:live", EntryReader(), keep)
    return scan, reads[0]


def exact_pass(replies: list[list[bytes]], keep: int = 5) -> LiveScan:
    """The reducer as it was (a set of field names, each field once)."""
    scan = LiveScan(key="arena:live", kind="hash", keep=keep)
    reduce = LiveReducer(scan, EntryReader(), exact=True)
    for items in replies:
        reduce(items)
    return scan.finish()


@settings(max_examples=400, deadline=None)
@given(generated_replies(60, 14, 6), st.integers(1, 6))
def test_digest_pass_equals_the_exact_pass_property(replies: list[list[bytes]], keep: int) -> None:
    scan, reads = digest_pass(replies, keep)
    assert canonical(scan) == canonical(exact_pass(replies, keep))
    assert canonical(scan) == canonical(reference_scan(replies, keep))
    names = [n for r in replies for n in r[0::2]]
    # read once when every field came once; read again (exactly) when one came twice
    assert reads == (1 if len(set(names)) == len(names) else 2)


def test_digest_pass_without_repeats_reads_once_and_keeps_no_names() -> None:
    v = b'{"started_at": 100, "host": "h"}'
    replies = [[f"m{i}".encode(), v] * 1 for i in range(50)]
    scan, reads = digest_pass(replies)
    assert reads == 1 and scan.entries == 50
    reduce = LiveReducer(LiveScan(key="k", kind="hash"), EntryReader(), exact=False)
    for items in replies:
        reduce(items)
    assert reduce.seen == set() and not reduce.repeated()
    assert sum(len(part) for part in reduce.digests) == 50


class Colliding(bytes):
    """A field name whose digest collides with every other Colliding name."""

    def __hash__(self) -> int:
        return 42


def test_two_names_with_one_digest_are_read_again_exactly() -> None:
    v = b'{"started_at": 100, "host": "h"}'
    replies = [[Colliding(b"a"), v, b"b", v], [Colliding(b"c"), v]]
    scan, reads = digest_pass(replies)  # type: ignore[arg-type]
    assert reads == 2 and scan.entries == 3  # a and c share a digest, yet both count


@pytest.mark.lab
def test_read_live_on_a_real_hash_equals_the_reference(lab: Lab) -> None:
    r = lab.client()
    r.hset("t:live", mapping={f"f{i}": json.dumps({"started_at": i}) for i in range(3000)})
    scan = read_live(lab.client(), "t:live", count=50, keep=4)
    reference = reference_scan([[x for kv in r.hgetall("t:live").items() for x in kv]], 4)
    assert canonical(scan)[:3] == canonical(reference)[:3]
    assert canonical(scan)[4:] == canonical(reference)[4:]
    assert scan.entries == 3000


@pytest.mark.lab
def test_fields_a_shrinking_hash_returns_twice_make_the_pass_read_again(lab: Lab) -> None:
    """Play the shrink for real (as test_live_hash does for the exact reducer): the digest
    pass must notice the repeat, read again, and count each field once."""
    r = lab.client()
    # Whether a field comes back depends on where the cursor stands when the table shrinks,
    # and that on the server's per-process hash seed: try many stopping points, not a few.
    for at in range(2, 60):
        r.delete("t:live")
        r.hset("t:live", mapping={f"f{i}": json.dumps({"started_at": i}) for i in range(5000)})
        replies: list[list[bytes]] = []
        cursor = 0
        while True:
            cursor, chunk = r.hscan("t:live", cursor, count=100)
            replies.append([x for kv in chunk.items() for x in kv])
            if len(replies) == at:
                got = {f for rep in replies for f in rep[0::2]}
                gone = [f"f{n}".encode() for n in range(5000)]
                r.hdel("t:live", *[f for f in gone if f not in got][:4400])
            if cursor == 0:
                break
        names = [f for rep in replies for f in rep[0::2]]
        if len(names) > len(set(names)):
            break
    else:
        pytest.fail("no field came back twice: this redis-server never repeats, test it anew")
    scan, reads = digest_pass(replies)
    assert reads == 2
    assert scan.entries == len(set(names)) < len(names)
    assert canonical(scan) == canonical(reference_scan(replies))


# ---------------------------------------------------------------- CLIENT LIST: line by line
def line_by_line(text: str | bytes) -> list[clientlist.Client]:
    """The reading the column path replaced: each line through `parse_line` on its own (the
    parser's own fallback, table-tested in test_clientlist)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return [c for c in map(clientlist.parse_line, text.splitlines()) if c is not None]


def same_clients(text: str | bytes) -> None:
    new, old = parse_client_list(text), line_by_line(text)
    assert [
        (c.id, c.host, c.port, c.name, c.age_s, c.idle_s, c.flags, c.cmd, c.fields) for c in new
    ] == [(c.id, c.host, c.port, c.name, c.age_s, c.idle_s, c.flags, c.cmd, c.fields) for c in old]


# ---------------------------------------------------------------- CLIENT LIST: generated tables
_value = st.text(st.sampled_from("abz09=-|:.[]/%_"), max_size=8)
_host = st.one_of(
    st.sampled_from(
        [
            "10.0.0.1",
            "127.0.1.2",
            "::1",
            "[::1]",
            "::ffff:10.1.2.3",
            "[fe80::2%eth0]",
            "/tmp/redis.sock",
            "unix",
            "mini.local",
            "",
            "2001:DB8::1",
            "1.2.3",
        ]
    ),
    _value,
)
_port = st.one_of(st.integers(0, 65535).map(str), st.sampled_from(["", "x", "0012", "99999999"]))
_number = st.one_of(st.integers(-5, 10**6).map(str), st.sampled_from(["", "x", "1_0", "+3"]))
_extra_keys = st.lists(
    st.sampled_from(["laddr", "fd", "db", "sub", "qbuf", "tot-mem", "lib-name", "user", "resp"]),
    unique=True,
    max_size=5,
)


@st.composite
def client_tables(draw: st.DrawFn) -> str:
    """A CLIENT LIST as one server writes it: the same keys in the same order on every
    line; the values anything a server or a fuzzer could put there."""
    keys = draw(
        st.permutations(
            draw(
                st.lists(
                    st.sampled_from(["id", "name", "age", "idle", "flags", "cmd"]), unique=True
                )
            )
            + ["addr"]
            + draw(_extra_keys)
        )
    )
    lines = []
    for _ in range(draw(st.integers(1, 12))):
        tokens = []
        for key in keys:
            if key == "addr":
                value = draw(_host) + draw(st.sampled_from([":", ""])) + draw(_port)
            elif key in ("id", "age", "idle"):
                value = draw(_number)
            else:
                value = draw(_value)
            tokens.append(f"{key}={value}")
        lines.append(" ".join(tokens))
    return "\n".join(lines) + draw(st.sampled_from(["\n", ""]))


@settings(max_examples=600, deadline=None)
@given(client_tables())
def test_column_reader_equals_the_old_parser_on_tables(text: str) -> None:
    same_clients(text)
    same_clients(text.encode())


def test_the_column_path_is_taken_for_a_server_shaped_list() -> None:
    line = (
        "id={i} addr=10.0.0.{h}:{p} laddr=10.0.0.1:6379 fd=9 name=w{i} age=3 idle=1 flags=N "
        "db=0 cmd=ping user=default resp=2"
    )
    text = "\n".join(line.format(i=i, h=i % 3, p=40000 + i) for i in range(300)) + "\n"
    assert clientlist._by_columns(text) is not None
    same_clients(text)
    # a tab, a blank line, a line of another shape, a repeated key: line by line, same answer
    for spoiled in (
        text.replace("name=w5 ", "name=w5\t", 1),
        text.replace("\n", "\n\n", 1),
        text + "id=1 addr=10.0.0.9:1 cmd=x\n",
        text.replace("fd=9", "name=first", 1),
        text.replace("\n", "\r\n"),
    ):
        assert clientlist._by_columns(spoiled) is None
        same_clients(spoiled)


@settings(max_examples=600, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=60),
            st.lists(
                st.tuples(st.sampled_from(["id", "addr", "name", "age", "cmd", "x"]), _value),
                max_size=6,
            ).map(lambda kv: " ".join(f"{k}={v}" for k, v in kv)),
        ),
        max_size=8,
    ),
    st.sampled_from(["\n", "\r\n", "\n\n", " \n", "\x0b"]),
)
def test_any_text_equals_the_old_parser(lines: list[str], sep: str) -> None:
    text = sep.join(lines)
    same_clients(text)
    same_clients(text.encode("utf-8", "surrogatepass"))


# ---------------------------------------------------------------- CLIENT LIST: the table
def reference_tally(clients: list[clientlist.Client]) -> list[tuple[object, int]]:
    return list(Counter((c.host, c.name, c.cmd, c.idle_s) for c in clients).items())


def reference_without_own(clients: list[clientlist.Client], own_id: int) -> list[Any]:
    """The patrol context's filter before issue 15, on Client rows."""
    own = next((c for c in clients if c.id == own_id), None)
    ours = {own.name, f"{own.name}-probe"} if own is not None and own.name else set()
    return [
        c
        for c in clients
        if c.id != own_id and not (own is not None and c.name in ours and c.host == own.host)
    ]


def rows(clients: list[clientlist.Client]) -> list[tuple[object, ...]]:
    return [(*c[:8], c.fields) for c in clients]


def same_table(text: str | bytes, own_id: int, away: frozenset[str], limit: int) -> None:
    """The table's counts, selection and own-connection filter equal the same questions asked
    of the line-by-line Clients."""
    old = line_by_line(text)
    table = read_client_table(text)
    assert len(table) == len(old)
    assert list(table.tally().items()) == reference_tally(old)

    def keep(host: str, name: str) -> bool:
        return host not in away and not name.startswith("a")

    picked = [(c.fields.get("addr", c.host), c.name, c.cmd) for c in old if keep(c.host, c.name)]
    assert table.select(keep, limit) == picked[:limit]
    ref = reference_without_own(old, own_id)
    mine = table.without_own(own_id)
    assert rows(mine.clients()) == rows(ref)
    assert list(mine.tally().items()) == reference_tally(ref)


@settings(max_examples=600, deadline=None)
@given(client_tables(), st.data())
def test_the_table_answers_as_the_line_by_line_clients(text: str, data: st.DataObject) -> None:
    ids = [c.id for c in line_by_line(text) if c.id is not None]
    own_id = data.draw(st.sampled_from(ids) if ids else st.integers(0, 5))
    hosts = sorted({c.host for c in line_by_line(text)})
    away = frozenset(data.draw(st.lists(st.sampled_from(hosts)) if hosts else st.just([])))
    limit = data.draw(st.integers(0, 14))
    same_table(text, own_id, away, limit)
    same_table(text.encode(), own_id, away, limit)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from(["id", "addr", "name", "idle", "cmd", "x"]), _value),
            max_size=6,
        ).map(lambda kv: " ".join(f"{k}={v}" for k, v in kv)),
        max_size=8,
    ),
    st.sampled_from(["\n", "\r\n", "\n\n", " \n"]),
    st.integers(0, 3),
)
def test_the_table_of_any_text_answers_as_the_line_by_line_clients(
    lines: list[str], sep: str, own_id: int
) -> None:
    same_table(sep.join(lines), own_id, frozenset({"", "unix"}), 6)


def test_own_connection_and_its_probe_sibling_leave_the_table() -> None:
    """Ours (by id), our rater probe's connection (NAME-probe) from the same host, but not a
    client of that name from another host: on the column path and line by line."""
    line = "id={i} addr={a}:{p} laddr=10.0.0.1:6379 fd=9 name={n} age=3 idle=1 flags=N cmd=ping"
    shape = [
        (1, "10.0.0.7", "w"),
        (2, "10.0.0.5", "fleetcheck"),
        (3, "10.0.0.5", "fleetcheck-probe"),
        (4, "10.0.0.6", "fleetcheck-probe"),
        (5, "10.0.0.5", "fleetcheck"),
    ]
    text = "\n".join(line.format(i=i, a=a, p=40000 + i, n=n) for i, a, n in shape) + "\n"
    assert clientlist._by_columns(text) is not None
    for spoiled in (text, text.replace(" fd=9", "\tfd=9")):
        kept = read_client_table(spoiled).without_own(2)
        assert [c.id for c in kept.clients()] == [1, 4]
        same_table(spoiled, 2, frozenset(), 5)
    # many connections of our name from our host (another fleetcheck there): all of them go
    many = shape + [(10 + i, "10.0.0.5", "fleetcheck") for i in range(12)] + [(30, "10.0.0.6", "w")]
    text = "\n".join(line.format(i=i, a=a, p=40000 + i, n=n) for i, a, n in many)
    for spoiled in (text, text.replace(" fd=9", "\tfd=9")):
        kept = read_client_table(spoiled).without_own(2)
        assert [c.id for c in kept.clients()] == [1, 4, 30]
        assert rows(kept.without_own(30).clients()) == rows(kept.clients()[:2])  # lines follow
        same_table(spoiled, 2, frozenset(), 5)


@pytest.mark.lab
def test_real_client_list_equals_the_old_parser(lab: Lab) -> None:
    """A real server's list with IPv4, IPv6 and unix-socket clients, named and not."""
    port, sock_path = dual_stack_server(lab, "fast.sock")
    clients = [
        redis.Redis(host="127.0.0.1", port=port, client_name=f"v4-{i}", protocol=2)
        for i in range(20)
    ]
    clients += [redis.Redis(host="::1", port=port, protocol=2) for i in range(10)]
    clients += [
        redis.Redis(unix_socket_path=sock_path, client_name=f"ux-{i}", protocol=2)
        for i in range(10)
    ]
    try:
        for c in clients:
            c.ping()
        raw = clients[0].execute_command("CLIENT", "LIST")
        assert clientlist._by_columns(raw.decode()) is not None  # the fast path, for real
        same_clients(raw)
        own = clients[0].client_id()
        same_table(raw, own, frozenset({"::1"}), 15)
        parsed = parse_client_list(raw)
        assert len(parsed) == 40
        assert {c.host for c in parsed} == {"127.0.0.1", "::1", "unix"}
    finally:
        for c in clients:
            c.close()
