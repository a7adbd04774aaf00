"""The fast paths of issue 15 against the implementations they replaced, on generated data:
the live-hash pass without a set of names (digests, exact re-read on a repeat) and
`normalise_ip`'s IPv4 shortcut (against ipaddress). CLIENT LIST has one reader now, held to
the field-by-field reading in test_clientlist."""

from __future__ import annotations

import json

import pytest
from fleetcheck.checks.live_hash.scan import LiveReducer, LiveScan, read_live, reduce_pass
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcheck.parse import clientlist
from fleetcheck.parse.instant import MS_THRESHOLD
from fleetcheck.parse.live_entry import Columns, EntryReader, columns, read_entry_json
from tests.lab import Lab
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
