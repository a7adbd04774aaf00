"""The fast paths of issue 15 against the implementations they replaced, on generated data:
the live-hash pass without a set of names (digests, exact re-read on a repeat) and the
column-wise CLIENT LIST reader (against the parser's own line-by-line fallback)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
import redis
from fleetcheck.checks.live_hash.scan import LiveReducer, LiveScan, read_live, reduce_pass
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcheck.parse import clientlist
from fleetcheck.parse.clientlist import parse_client_list, read_client_table
from fleetcheck.parse.instant import MS_THRESHOLD
from fleetcheck.parse.live_entry import Columns, EntryReader, columns, read_entry_json
from tests.lab import Lab
from tests.test_clientlist import dual_stack_server
from tests.test_live_hash import (
    canonical,
    generated_replies,
    line_values,
    live_values,
    reference_scan,
    same,
)


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
                unread = [f for f in gone if f not in got][:4400]
                if unread:  # a large scan step may have read them all already
                    r.hdel("t:live", *unread)
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


# ---------------------------------------------------------------- live hash: writer shapes
_NUMBER_TEXT = r"-?(0|[1-9][0-9]{0,33}|0[0-9]+)(\.[0-9]{0,33})?([eE][-+]?[0-9]{1,4})?"
_printable = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
_hosts = st.one_of(
    st.text(_printable, max_size=10),  # commas, colons, braces, spaces, quotes, backslashes
    st.sampled_from(["", " h ", "a,b", ": ", "}", '", "host": "x', "a\\\\b", "é", "host3"]),
)
_starts = st.one_of(
    st.floats(min_value=0, max_value=2e15).map(repr),  # json.dumps's text of a float
    st.integers(0, 10**16).map(str),
    st.from_regex(_NUMBER_TEXT, fullmatch=True),
    st.sampled_from(["1764517795.8463974", repr(MS_THRESHOLD), "1e400", "-0", "05", "1.", ".5"]),
)


@st.composite
def writer_values(draw: st.DrawFn) -> bytes:
    """`{"started_at": <number>, "host": "<text>"}` as json.dumps or JSON.stringify write
    it, the host's text put in raw (quotes, backslashes and non-ASCII give other shapes or
    no JSON), now and then json-escaped; the number any text of a number, valid or not."""
    colon, comma = draw(st.sampled_from([(": ", ", "), (":", ",")]))
    host = draw(_hosts)
    quoted = json.dumps(host) if draw(st.integers(0, 9)) == 0 else f'"{host}"'
    text = '{"started_at"' + colon + draw(_starts) + comma + '"host"' + colon + quoted + "}"
    return text.encode()


@st.composite
def writer_replies(draw: st.DrawFn) -> list[list[bytes]]:
    """Replies mostly of writer shapes, with values of any other shape among them (up to
    every one), field names repeating now and then."""
    odd_share = draw(st.sampled_from([0, 0, 1, 5, 10]))  # of 10
    value = st.integers(0, 9).flatmap(
        lambda k: st.one_of(live_values(), line_values()) if k < odd_share else writer_values()
    )
    pairs = st.tuples(st.integers(0, 80), value)
    replies = draw(st.lists(st.lists(pairs, min_size=1, max_size=45), max_size=4))
    return [[x for n, v in reply for x in (f"m{n}".encode(), v)] for reply in replies]


@settings(max_examples=300, deadline=None)
@given(writer_replies(), st.integers(1, 6))
def test_writer_shapes_cut_whole_equal_the_reference_property(
    replies: list[list[bytes]], keep: int
) -> None:
    scan, _reads = digest_pass(replies, keep)
    assert canonical(scan) == canonical(reference_scan(replies, keep))
    assert canonical(exact_pass(replies, keep)) == canonical(reference_scan(replies, keep))


@settings(max_examples=500, deadline=None)
@given(st.lists(writer_values(), min_size=1, max_size=30))
def test_columns_cut_each_value_as_json_reads_it_property(values: list[bytes]) -> None:
    """Whatever Columns.split takes, json reads the same start and owner; what it leaves
    out is exactly what it reports as odd."""
    joined = b"\n".join(values)
    for shape in columns("started_at", "host"):
        cut = shape.split(values, joined)
        if cut is None:
            assert sum(not v.startswith(shape.prefix) for v in values) > Columns.ODD_MAX
            continue
        odd, numbers, owners = cut
        taken = [v for i, v in enumerate(values) if i not in odd]
        assert len(taken) == len(numbers) == len(owners)
        for value, number, owner in zip(taken, numbers, owners, strict=True):
            doc = json.loads(value)
            assert set(doc) == {"started_at", "host"}
            assert same(json.loads(number), doc["started_at"]) and owner.decode() == doc["host"]
            assert value == shape.prefix + number + shape.sep + owner + b'"}'
        for i in odd:  # a value the shape leaves: not in it, byte for byte
            assert shape.split([values[i]], values[i]) == ([0], [], [])


def test_columns_take_a_clean_reply_whole_and_cut_out_a_few_odd_lines() -> None:
    good = [b'{"started_at": %d.25, "host": "h%d"}' % (i, i % 3) for i in range(200)]
    shape, compact = columns("started_at", "host")
    odd, numbers, owners = shape.split(good, b"\n".join(good))  # type: ignore[misc]
    assert odd == [] and numbers[:2] == [b"0.25", b"1.25"] and owners[:2] == [b"h0", b"h1"]
    mixed = list(good)
    for i in (0, 7, 8, 199):  # first, neighbours, last
        mixed[i] = b"not json"
    mixed[50] = b'{"started_at":5,"host":"compact"}'  # the other spacing: another shape here
    odd, numbers, owners = shape.split(mixed, b"\n".join(mixed))  # type: ignore[misc]
    assert odd == [0, 7, 8, 50, 199] and len(numbers) == 195 and owners[0] == b"h1"
    assert compact.split([mixed[50]], mixed[50]) == ([], [b"5"], [b"compact"])
    many = [b"x"] * (Columns.ODD_MAX + 1) + good
    assert shape.split(many, b"\n".join(many)) is None
    assert shape.split([b"x", b"y"], b"x\ny") == ([0, 1], [], [])


def test_columns_only_for_plain_field_names_with_an_owner() -> None:
    assert len(columns("t0", "node-name")) == 2
    for started, owner in (("started_at", None), ("a:b", "host"), ("t", "a b"), ("t", "t")):
        assert columns(started, owner) == ()
    reader = EntryReader("t0", "node")
    replies = [[b"m1", b'{"t0": 5, "node": "big"}', b"m2", b'{"node": "x", "t0": 6}']]
    scan = LiveScan(key="k", kind="hash")
    reduce = LiveReducer(scan, reader, exact=False)
    reduce(replies[0])
    assert sorted(zip(scan.starts, scan.owners, strict=True)) == [(5.0, 0), (6.0, 1)]
    assert scan.owner_names == ["big", "x"]


NOT_JSON_AT_ONCE = [  # refused before json is asked; json refuses each the same way
    b"not json",
    b"",
    b" \t\r\n",
    b"nul",
    b"nulL",
    b"tru",
    b"fals",
    b"Na",
    b"Infinit",
    b"x{}",
    b"\x0b{}",  # a vertical tab is no JSON whitespace
    b"\xef\xbb\xbf{}",  # a BOM
    b"\xff",
    b"\xc3\xa9",
]
JSON_ASKED = [b"null", b"true", b"false", b"NaN", b"Infinity", b"-Infinity", b" 5", b'"s"']


@pytest.mark.parametrize("value", NOT_JSON_AT_ONCE + JSON_ASKED)
def test_values_that_cannot_start_json_read_as_json_reads_them(value: bytes) -> None:
    assert same(EntryReader()(value), read_entry_json(value))


@settings(max_examples=800, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=12),
        st.sampled_from(JSON_ASKED + NOT_JSON_AT_ONCE).flatmap(
            lambda v: st.binary(max_size=4).map(lambda tail: v + tail)
        ),
    )
)
def test_any_bytes_read_as_json_reads_them_property(value: bytes) -> None:
    assert same(EntryReader()(value), read_entry_json(value))


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
    line (all the keys we read, as real servers print them, half the time; any of them
    otherwise); the values anything a server or a fuzzer could put there. Sometimes lines
    end in a few keys more, needed ones included (a table that is not uniform)."""
    read = ["id", "name", "age", "idle", "flags", "cmd"]
    keys = draw(
        st.permutations(
            draw(st.one_of(st.just(read), st.lists(st.sampled_from(read), unique=True)))
            + ["addr"]
            + draw(_extra_keys)
        )
    )
    ragged = draw(st.integers(0, 3)) == 0
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
        if ragged:
            for key in draw(st.lists(st.sampled_from([*read, "addr", "x"]), max_size=2)):
                tokens.append(f"{key}={draw(_value)}")
        lines.append(" ".join(tokens))
    return "\n".join(lines) + draw(st.sampled_from(["\n", ""]))


@settings(max_examples=600, deadline=None)
@given(client_tables())
def test_column_reader_equals_the_old_parser_on_tables(text: str) -> None:
    same_clients(text)
    same_clients(text.encode())


SHORT_LINE = (  # cmd two keys after flags: Client rows walk every key up to it
    "id={i} addr=10.0.0.{h}:{p} laddr=10.0.0.1:6379 fd=9 name=w{i} age=3 idle=1 flags=N "
    "db=0 cmd=ping user=default resp=2"
)
REDIS7_LINE = (  # cmd 16 keys after flags: the keys between are skipped, " cmd=" counted
    "id={i} addr=10.0.0.{h}:{p} laddr=10.0.0.1:6379 fd=9 name=w{i} age=3 idle=1 flags=N "
    "db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=1024 "
    "rbp=0 obl=0 oll=0 omem=0 tot-mem=1800 events=r cmd=ping user=default redir=-1 resp=2"
)


@pytest.mark.parametrize("line", [SHORT_LINE, REDIS7_LINE])
def test_the_column_path_is_taken_for_a_server_shaped_list(line: str) -> None:
    text = "\n".join(line.format(i=i, h=i % 3, p=40000 + i) for i in range(300)) + "\n"
    assert clientlist._by_columns(text) is not None
    assert clientlist._counted_rows(text) is not None
    same_clients(text)
    same_table(text, 7, frozenset({"10.0.0.1"}), 5)
    # a tab, a blank line, a line of another shape, a repeated key (before the ones we read,
    # or a second cmd before the one a skip would find): line by line, same answer
    for spoiled in (
        text.replace("name=w5 ", "name=w5\t", 1),
        text.replace("\n", "\n\n", 1),
        text + "id=1 addr=10.0.0.9:1 cmd=x\n",
        text.replace("fd=9", "name=first", 1),
        text.replace("db=0", "cmd=first", 1),
        text.replace("\n", "\r\n"),
    ):
        assert clientlist._by_columns(spoiled) is None
        assert clientlist._counted_rows(spoiled) is None
        same_clients(spoiled)
        same_table(spoiled, 7, frozenset({"10.0.0.1"}), 5)


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


# ---------------------------------------------------------------- addresses
def normalise_ip_by_ipaddress(text: str) -> str:
    """normalise_ip before its IPv4 fast path and cache: ipaddress for every address."""
    import ipaddress

    text = text.strip().strip("[]")
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return text
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


@settings(max_examples=1000, deadline=None)
@given(
    st.one_of(
        st.text(st.sampled_from("0123456789.:abcdefx[]% \x00１"), max_size=20),
        st.tuples(*[st.integers(0, 300)] * 4).map(lambda t: ".".join(map(str, t))),
        st.ip_addresses().map(str),
    )
)
def test_normalise_ip_equals_ipaddress_on_any_text(text: str) -> None:
    assert clientlist.normalise_ip(text) == normalise_ip_by_ipaddress(text)


# ---------------------------------------------------------------- CLIENT LIST: the table
def reference_groups(clients: list[clientlist.Client]) -> list[tuple[object, int]]:
    return list(Counter((c.host, c.name, c.cmd) for c in clients).items())


def reference_max_idle(clients: list[clientlist.Client]) -> dict[str, int]:
    longest: dict[str, int] = {}
    for c in clients:
        if c.idle_s is not None:
            longest[c.host] = max(c.idle_s, longest.get(c.host, c.idle_s))
    return longest


def reference_waiting(clients: list[clientlist.Client]) -> dict[str, int]:
    waiting: dict[str, int] = {}
    for c in clients:
        blocked = "b" in c.flags or "P" in c.flags
        waiting[c.host] = waiting.get(c.host, 0) + int(blocked)
    return waiting


def same_counts(table: clientlist.ClientTable, clients: list[clientlist.Client]) -> None:
    assert list(table.groups().items()) == reference_groups(clients)
    assert table.waiting() == reference_waiting(clients)
    assert table.max_idle() == reference_max_idle(clients)
    assert table.hosts() == {c.host for c in clients}
    for host in {c.host for c in clients} | {"nobody"}:
        assert table.groups_of(host) == {
            k: n
            for k, n in reference_groups(clients)
            if k[0] == host  # type: ignore[index]
        }


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


def reference_ages(clients: list[clientlist.Client], below: int | None) -> dict[str, Any]:
    ages: dict[str, dict[int, int]] = {}
    for c in clients:
        if c.age_s is not None and (below is None or c.age_s < below):
            mine = ages.setdefault(c.host, {})
            mine[c.age_s] = mine.get(c.age_s, 0) + 1
    return ages


def same_table(text: str | bytes, own_id: int, away: frozenset[str], limit: int) -> None:
    """The table's counts, selection and own-connection filter equal the same questions asked
    of the line-by-line Clients, from the reply as text and as bytes (as redis-py gives it)."""
    forms = [text, text.encode("utf-8", "surrogateescape")] if isinstance(text, str) else [text]
    for form in forms:
        one_table(form, own_id, away, limit)


def one_table(text: str | bytes, own_id: int, away: frozenset[str], limit: int) -> None:
    old = line_by_line(text)
    table = read_client_table(text)
    for below in (None, 3, 8, 5000):
        assert table.ages(below) == reference_ages(old, below)
    assert len(table) == len(old)
    same_counts(table, old)

    def keep(host: str, name: str) -> bool:
        return host not in away and not name.startswith("a")

    picked = [(c.fields.get("addr", c.host), c.name, c.cmd) for c in old if keep(c.host, c.name)]
    assert table.select(keep, limit) == picked[:limit]
    ref = reference_without_own(old, own_id)
    mine = table.without_own(own_id)
    assert rows(mine.clients()) == rows(ref)
    same_counts(mine, ref)


@pytest.mark.parametrize(
    "text",
    [
        "id=0 name= flags= addr=[:1\n",  # no "]": split_addr's host is ":1" and no port
        "id=0 addr=[::1]x:5 name=a\n",  # text after "]": no port
        "id=0 addr=[h]]:5 name=a\n",
        "id=0 addr=[h]::5 name=a\n",
        "id=1 addr=[::1]:5 name=a\nid=2 addr=[::2]:6 name=b\n",
        # lines the counting path reads (every key it needs): without "]" split_addr keeps
        # the port in the host, which that path does not read (found by a review)
        REDIS7_LINE.format(i=1, h=1, p=5).replace("10.0.0.1:5", "[::1:6379") + "\n",
        REDIS7_LINE.format(i=1, h=1, p=5).replace("10.0.0.1:5", "[a:5"),
        REDIS7_LINE.format(i=1, h=1, p=5).replace("10.0.0.1:5", "[::1]:5") + "\n",
        "\n".join(
            REDIS7_LINE.format(i=i, h=1, p=5).replace("10.0.0.1:5", f"[::1:{6379 + i}")
            for i in (1, 2)
        ).replace("name=w2", "name=w1-probe"),
    ],
)
def test_bracketed_addresses_read_as_split_addr_reads_them(text: str) -> None:
    """Found by the property below: a bracketed host part read column-wise lost its port
    dependence ('[:1' read as host ':0')."""
    same_clients(text)
    same_table(text, 0, frozenset(), 5)
    same_table(text, 1, frozenset({"::1:6379"}), 5)


@pytest.mark.parametrize(
    "text",
    [
        "name=a idle=1 age=2 flags=N addr=10.0.0.1:5 id=0123 f1=x f2=y cmd=ping\n",
        "name=a idle=1 age=2 flags=N addr=10.0.0.1:5 id=12x f1=x f2=y cmd=ping\n",
        "id=1 name=a idle=1 age=2 flags=N addr=fe80::1:x f1=x f2=y cmd=ping\n",
        "id=1 name=a idle=1 age=2 flags=N addr=10.0.0.1:5x f1=x f2=y cmd=ping\n",
        "id=1 name=a idle=1 age=2 flags=N addr=[::1]:5x f1=x f2=y cmd=ping\n",
    ],
)
def test_the_value_before_the_skip_to_cmd_ends_at_its_token(text: str) -> None:
    """id or addr read last before the skip to cmd: its pattern alone does not say where
    the value ends ('id=0123' was read as 0, 'addr=fe80::1:x' as host 'fe80:'; a review)."""
    same_clients(text)
    for own_id in (0, 1, 12, 123):
        same_table(text, own_id, frozenset({"fe80::1", "10.0.0.1"}), 5)


def test_a_negative_limit_is_refused_on_both_paths() -> None:
    text = REDIS7_LINE.format(i=1, h=1, p=5) + "\n"
    for table in (read_client_table(text), read_client_table(text.replace(" fd=", "\tfd="))):
        with pytest.raises(ValueError, match="limit must be 0 or more"):
            table.select(lambda h, n: True, -1)


@pytest.mark.parametrize(
    "text",
    [
        # the first line lacks a key we read; a later line's is then its first occurrence
        "id=1 addr=10.0.0.1:5 age=0 idle=0 flags=N cmd=ping\n"
        "id=2 addr=10.0.0.2:6 age=0 idle=0 flags=N cmd=ping name=worker\n",
        "id=1 addr=10.0.0.1:5 name=a age=0 flags=N cmd=ping\n"
        "id=2 addr=10.0.0.2:6 name=b age=0 flags=N cmd=ping idle=7\n",
    ],
)
def test_a_key_the_first_line_lacks_is_read_as_parse_line_reads_it(text: str) -> None:
    same_clients(text)
    same_table(text, 0, frozenset(), 5)


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
    assert clientlist._counted_rows(text) is not None
    for spoiled in (text, text.replace(" fd=9", "\tfd=9")):
        kept = read_client_table(spoiled).without_own(2)
        assert [c.id for c in kept.clients()] == [1, 4]
        same_table(spoiled, 2, frozenset(), 5)
    # names that hold ours (a prefix, a suffix, the probe's name in another) are not ours;
    # ours as the line's last token is
    near = [
        (1, "10.0.0.5", "fleetcheck2"),
        (2, "10.0.0.5", "fleetcheck"),
        (3, "10.0.0.5", "xfleetcheck"),
        (4, "10.0.0.5", "fleetcheck-probe2"),
        (5, "10.0.0.5", "fleetcheck-probe"),
    ]
    last = "id={i} addr={a}:{p} laddr=10.0.0.1:6379 fd=9 age=3 idle=1 flags=N cmd=ping name={n}"
    for template in (line, last):
        text = "\n".join(template.format(i=i, a=a, p=40000 + i, n=n) for i, a, n in near)
        kept = read_client_table(text).without_own(2)
        assert [c.id for c in kept.clients()] == [1, 3, 4]
        same_table(text, 2, frozenset(), 5)
    # many connections of our name from our host (another fleetcheck there): all of them go
    many = shape + [(10 + i, "10.0.0.5", "fleetcheck") for i in range(12)] + [(30, "10.0.0.6", "w")]
    text = "\n".join(line.format(i=i, a=a, p=40000 + i, n=n) for i, a, n in many)
    for spoiled in (text, text.replace(" fd=9", "\tfd=9")):
        kept = read_client_table(spoiled).without_own(2)
        assert [c.id for c in kept.clients()] == [1, 4, 30]
        assert rows(kept.without_own(30).clients()) == rows(kept.clients()[:2])  # lines follow
        same_table(spoiled, 2, frozenset(), 5)


SERVER_LINE = (
    "id={i} addr={a}:{p} laddr=10.0.0.1:6379 fd=9 name={n} age=3 idle=1 flags=N db=0 sub=0 "
    "psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=1024 rbp=0 obl=0 "
    "oll=0 omem=0 tot-mem=1800 events=r cmd=ping user=default redir=-1 resp=2"
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 9),  # ids from a few: sometimes one twice
            st.sampled_from(["10.0.0.5", "10.0.0.6", "::1", "::ffff:10.0.0.5", "/tmp/r.sock"]),
            st.sampled_from(["fc", "fc-probe", "fc-probe2", "xfc", "fc2", "w", "", "a=b"]),
        ),
        min_size=1,
        max_size=14,
    ),
    st.integers(0, 10),
    st.sampled_from(["\n", ""]),
)
def test_own_rows_of_a_server_shaped_list_equal_the_reference(
    shape: list[tuple[int, str, str]], own_id: int, end: str
) -> None:
    """The own-connection filter's quick way (our line found by its id anywhere in the
    list, the rows of our names from our host picked from the names read) leaves what the
    line-by-line filter leaves, whatever the list's order: our line first, last, or amid
    others, ours unnamed, an id twice, an id in no line, our names from other hosts."""
    text = "\n".join(
        SERVER_LINE.format(i=i, a=a, p=40000 + k, n=n) for k, (i, a, n) in enumerate(shape)
    )
    text += end
    ids = [i for i, _, _ in shape]
    for form in (text, text.encode()):
        table = read_client_table(form)
        assert table._found is not None  # the column path, where the quick way applies
        quick = table._own_rows(own_id)
        if ids.count(own_id) == 1 and shape[ids.index(own_id)][2]:
            assert quick is not None  # taken wherever it holds
        one_table(form, own_id, frozenset(), 5)


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
        assert clientlist._by_columns(raw.decode()) is not None  # the fast paths, for real
        assert clientlist._counted_rows(raw.decode()) is not None
        same_clients(raw)
        own = clients[0].client_id()
        same_table(raw, own, frozenset({"::1"}), 15)
        parsed = parse_client_list(raw)
        assert len(parsed) == 40
        assert {c.host for c in parsed} == {"127.0.0.1", "::1", "unix"}
    finally:
        for c in clients:
            c.close()


def test_a_bytes_reply_is_read_column_wise_as_bytes() -> None:
    """redis-py hands CLIENT LIST over as bytes: the column path reads them without decoding
    the whole reply, and answers in text like the text's table."""
    line = (
        "id={i} addr=10.0.0.{h}:{p} laddr=10.0.0.1:6379 fd=9 name=w{h} age={i} idle=1 "
        "flags={f} cmd=ping"
    )
    text = (
        "\n".join(
            line.format(i=i, h=i % 3, p=40000 + i, f="b" if i == 4 else "N") for i in range(1, 9)
        )
        + "\n"
    )
    raw = read_client_table(text.encode())
    assert raw._found is not None and isinstance(raw._found[0][0], bytes)
    as_text = read_client_table(text)
    assert raw.groups() == as_text.groups() and raw.waiting() == as_text.waiting()
    assert (
        raw.ages(5)
        == as_text.ages(5)
        == {"10.0.0.1": {1: 1, 4: 1}, "10.0.0.2": {2: 1}, "10.0.0.0": {3: 1}}
    )
    kept = raw.without_own(4)
    assert [c.id for c in kept.clients()] == [2, 3, 5, 6, 8]  # ours: w1 from 10.0.0.1
    assert all(isinstance(k, str) for group in kept.groups() for k in group)
