"""clients over rounds, pure: connected but silent, reconnected, fewer of a kind, missing
names, broker-wide churn, and which hosts have a row at all. Every rule with its boundaries;
facts are built as the probe builds them (ClientsFacts), the previous round as it carries."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fleetcheck.checks.clients.check import (
    CHECK,
    ClientsConfig,
    ClientsFacts,
    expects_clients,
    facts_of,
)
from fleetcheck.checks.clients.facts import QUIET_SAMPLES, limit_of, nums

from fleetcheck.config import HostConfig
from fleetcheck.core.hostfacts import ClientsHostConfig
from fleetcheck.core.model import Status
from fleetcheck.parse.clientlist import (
    ClientTable,
    name_pattern,
    parse_client_list,
    read_client_table,
)

NOW = datetime(2026, 11, 29, 6, 21, tzinfo=UTC)
T = NOW.timestamp()
ADDR = "192.168.1.30"


def host(min_clients: int = 1, silent_after: float | None = None, addrs: tuple[str, ...] = (ADDR,)):
    return HostConfig(name="mini").with_settings(
        ClientsHostConfig(addrs, min_clients, silent_after)
    )


def hfacts(
    n: int = 10,
    quiet: int = 0,
    waiting: int = 0,
    ages: dict[int, int] | None = None,
    previous: dict[str, Any] | None = None,
    queued: int | None = None,
    names: dict[str, int] | None = None,
) -> ClientsFacts:
    """A host row's facts: `n` connections (named by `names`), the chattiest idle `quiet` s."""
    names = names if names is not None else {"worker-mini": n}
    groups = {(ADDR, name, "ping"): k for name, k in names.items() if k}
    total = sum(groups.values())
    return ClientsFacts(
        groups,
        frozenset({ADDR}),
        {ADDR: quiet + 5} if total else {},
        min_idle={ADDR: quiet} if total else {},
        waiting={ADDR: waiting} if waiting else {},
        ages=ages if ages is not None else ({1000: total} if total else {}),
        previous=previous,
        queued=queued,
    )


def run(facts: ClientsFacts, h: HostConfig | None = None, config: ClientsConfig | None = None):
    return CHECK.evaluate(facts, config or ClientsConfig(), h or host(), NOW)


# ---------------------------------------------------------------- connected but silent
@pytest.mark.parametrize(
    ("facts", "h", "status"),
    [
        # the first round seen teaches and never judges (a pool idle by design is no alarm)
        (hfacts(quiet=31), None, Status.OK),
        (hfacts(quiet=7200), None, Status.OK),
        # after one round: the default limit, 30s (silence past it, not at it)
        (hfacts(quiet=29, previous={"quiet": [1]}), None, Status.OK),
        (hfacts(quiet=30, previous={"quiet": [1]}), None, Status.OK),
        (hfacts(quiet=31, previous={"quiet": [1]}), None, Status.WARN),
        # the done-when case: answered every second, then ~45 s of silence
        (hfacts(quiet=45, previous={"quiet": [1, 0, 1, 1]}), None, Status.WARN),
        # work waiting in the queues meanwhile: CRIT
        (hfacts(quiet=45, queued=12, previous={"quiet": [1]}), None, Status.CRIT),
        # one connection blocked in a pop or subscribed: waiting for work, healthy at any idle
        (hfacts(quiet=7200, waiting=1), None, Status.OK),
        (hfacts(quiet=7200, waiting=1, queued=50), None, Status.OK),
        # learned: three times the longest quiet of its healthy rounds (20 s -> 60 s)
        (hfacts(quiet=45, previous={"quiet": [20, 5]}), None, Status.OK),
        (hfacts(quiet=60, previous={"quiet": [20, 5]}), None, Status.OK),
        (hfacts(quiet=61, previous={"quiet": [20, 5]}), None, Status.WARN),
        # a learned limit never goes under the floor
        (hfacts(quiet=29, previous={"quiet": [0, 0]}), None, Status.OK),
        # a host's own silent_after: fixed (boundary), and 0 switches it off
        (hfacts(quiet=3), host(silent_after=3.0), Status.OK),
        (hfacts(quiet=4, previous={"quiet": [100]}), host(silent_after=3.0), Status.WARN),
        (hfacts(quiet=100000), host(silent_after=0.0), Status.OK),
    ],
)
def test_silence(facts: ClientsFacts, h: HostConfig | None, status: Status) -> None:
    r = run(facts, h)
    assert r.status is status, r.summary
    if status is not Status.OK:
        assert "silent: none of its 10 connections has sent a command for" in r.summary
        assert r.evidence_strength == "behaviour"
    if status is Status.CRIT:
        assert "while 12 jobs wait in the queues" in r.summary


def test_silence_default_is_sane() -> None:
    """The default limit before a baseline, and the floor of every learned one, is 30s: past
    any poll interval a worker that pulls jobs keeps (its quietest connection speaks at least
    that often), and under the ~45 s of silence a frozen worker must be seen within."""

    def silence_limit(previous: dict[str, Any] | None) -> tuple[float | None, float | None]:
        quiet = nums((previous or {}).get("quiet"), QUIET_SAMPLES)
        return limit_of(ClientsHostConfig(), ClientsConfig(), quiet)

    assert silence_limit(None) == (30.0, None)
    assert silence_limit({"quiet": [2, 1]}) == (30.0, 2.0)
    assert silence_limit({"quiet": [40]}) == (120.0, 40.0)
    # damaged state is no baseline
    assert silence_limit({"quiet": "x"}) == (30.0, None)
    assert silence_limit({"quiet": [True, "1"]})[0] == 30


def test_silence_baseline_learns_healthy_rounds_only() -> None:
    healthy = run(hfacts(quiet=2, previous={"quiet": [1]}))
    assert healthy.carry is not None and healthy.carry["quiet"] == [1, 2]
    silent = run(hfacts(quiet=400, previous={"quiet": [1]}))
    assert silent.status is Status.WARN
    assert silent.carry is not None and silent.carry["quiet"] == [1]  # silence is not the norm
    waiting = run(hfacts(quiet=400, waiting=2, previous={"quiet": [1]}))
    assert waiting.carry is not None and waiting.carry["quiet"] == [1]


def test_first_round_seen_teaches_and_never_judges() -> None:
    """A host first seen with every connection idle for two hours (a pool idle by design) is
    OK and that quiet becomes its baseline: the next round judges against 3x it."""
    first = run(hfacts(quiet=7200))
    assert first.status is Status.OK, first.summary
    assert first.carry is not None and first.carry["quiet"] == [7200]
    assert run(hfacts(quiet=7300, previous=first.carry)).status is Status.OK
    assert run(hfacts(quiet=21601, previous=first.carry)).status is Status.WARN


def test_idle_host_whose_quiet_grows_each_round_is_learned() -> None:
    """Connections that never speak, first seen just connected, rounds a second apart: the
    baseline keeps up with the growing idle time (no false alarm)."""
    previous: dict[str, Any] | None = None
    for k in range(1, 200):
        r = CHECK.evaluate(
            hfacts(quiet=k, previous=previous),
            ClientsConfig(),
            host(),
            NOW + timedelta(seconds=k),
        )
        assert r.status is Status.OK, (k, r.summary)
        previous = r.carry


# ---------------------------------------------------------------- reconnected
def test_reconnect_note_once_with_utc_time() -> None:
    prev = {"at": T - 900, "n": 10}
    r = run(hfacts(ages={100: 6, 98: 4}, previous=prev))
    assert r.status is Status.OK
    assert "reconnected at 06:19:20 UTC-06:19:22 UTC (10 of 10 connections new" in r.summary
    assert r.evidence["reconnected"]["first_s"] == "2026-11-29T06:19:20Z"
    assert r.carry is not None and r.carry["reconnects"] == [T]
    # the next round: the same connections, older now: nothing said
    later = CHECK.evaluate(
        hfacts(ages={1000: 10}, previous=r.carry),
        ClientsConfig(),
        host(),
        NOW + timedelta(minutes=15),
    )
    assert later.status is Status.OK and "reconnected" not in later.summary


@pytest.mark.parametrize(
    ("n", "ages", "event"),
    [
        (10, {100: 10}, True),  # all replaced
        (10, {100: 5, 5000: 5}, True),  # half: the boundary
        (10, {100: 4, 5000: 6}, False),  # fewer than half
        (20, {100: 10, 5000: 10}, False),  # a pool that grew: none of the old ones closed
        (10, {5000: 10}, False),  # nothing new
        (10, {898: 10}, True),  # made just after the previous round
        (10, {899: 10}, False),  # within a second of the interval: not surely new (whole s)
    ],
)
def test_reconnect_rule(n: int, ages: dict[int, int], event: bool) -> None:
    r = run(hfacts(n=n, ages=ages, previous={"at": T - 900, "n": 10}))
    assert r.status is Status.OK
    assert ("reconnected at" in r.summary) is event


def test_reconnect_needs_a_previous_round() -> None:
    assert "reconnected" not in run(hfacts(ages={0: 10})).summary
    assert "reconnected" not in run(hfacts(ages={0: 10}, previous={"at": "x", "n": 10})).summary


@pytest.mark.parametrize(
    ("earlier", "status"),
    [
        ([], Status.OK),
        ([T - 1200], Status.OK),
        ([T - 2400, T - 1200], Status.WARN),  # the third within the hour: flapping
        ([T - 3700, T - 1200], Status.OK),  # the first is out of the window
        ([T - 3600, T - 1200], Status.WARN),  # at the window's edge: still in
    ],
)
def test_flapping(earlier: list[float], status: Status) -> None:
    prev = {"at": T - 600, "n": 10, "reconnects": earlier}
    r = run(hfacts(ages={30: 10}, previous=prev))
    assert r.status is status, r.summary
    if status is Status.WARN:
        assert r.summary.startswith("10 broker connections (192.168.1.30: 10); flapping: ")
        assert "reconnected 3 times within 1h" in r.summary
        assert r.evidence_strength == "behaviour"


def test_flapping_stays_while_the_window_holds_three() -> None:
    prev = {"at": T - 600, "n": 10, "reconnects": [T - 1800, T - 1200, T - 600]}
    r = run(hfacts(ages={5000: 10}, previous=prev))  # no reconnect this round
    assert r.status is Status.WARN


# ---------------------------------------------------------------- fewer of a kind, names
def test_half_a_kind_gone_is_a_note_then_warn() -> None:
    prev = {"patterns": {"worker-n8-*": [12, 12, 12]}}
    names = {f"worker-n8-{i}": 1 for i in range(6)}
    first = run(hfacts(names=names, previous=prev))
    assert first.status is Status.OK
    assert "worker-n8-*: 6 connections, usually 12" in first.summary
    second = run(hfacts(names=names, previous=first.carry))
    assert second.status is Status.WARN
    assert "worker-n8-*: 6 connections, usually 12 (for two rounds)" in second.summary
    assert second.evidence_strength == "behaviour"


@pytest.mark.parametrize(
    ("history", "now", "low"),
    [
        ([12, 12], 6, True),
        ([12, 12], 7, False),
        ([12], 0, False),  # one round is no history
        ([1, 1], 0, False),  # a kind of one: min_clients is the judge
        ([2, 2], 1, True),
        ([12, 12, 12, 4, 4, 4, 4], 4, False),  # a scale-down became the usual count
    ],
)
def test_pattern_rule(history: list[int], now: int, low: bool) -> None:
    names = {f"w:n8:{i}": 1 for i in range(now)} or {"other": 1}
    prev = {"patterns": {"w:n8:*": history}, "low": ["w:n8:*"]}
    r = run(hfacts(names=names, previous=prev), host(min_clients=0))
    assert (r.status is Status.WARN) is low, r.summary


def test_min_clients_names_the_missing() -> None:
    prev = {"names": {"w-1": 1, "w-2": 1, "w-3": 1, "pool": 4}}
    r = run(hfacts(names={"w-1": 1, "pool": 2}, previous=prev), host(min_clients=7))
    assert r.status is Status.WARN and r.evidence_strength == "proof"
    assert r.summary == (
        "3 broker connections, fewer than min_clients 7 (192.168.1.30: 3); "
        "missing: w-2, w-3, pool (2 of 4)"
    )
    none = run(hfacts(names={}, previous=prev), host(min_clients=1))
    assert none.status is Status.CRIT
    assert none.summary.startswith("no broker connections from 192.168.1.30; missing: w-1")
    # the names kept are those of a round at strength, not of the short one
    assert none.carry is not None and none.carry["names"] == prev["names"] | {}


# ---------------------------------------------------------------- broker-wide churn
def bfacts(
    received: int | None, ages: dict[int, int], previous: dict[str, Any] | None, run_id: str = "a"
) -> ClientsFacts:
    n = sum(ages.values())
    return ClientsFacts(
        {("10.0.0.5", "w", "ping"): n},
        frozenset({"10.0.0.5"}),
        ages=ages,
        young={"10.0.0.9": 3, "10.0.0.5": 1},
        previous=previous,
        received=received,
        run_id=run_id,
    )


def brun(facts: ClientsFacts, config: ClientsConfig | None = None):
    return CHECK.evaluate(facts, config or ClientsConfig(), None, NOW)


def test_churn_40_a_second_for_15_seconds_warns_with_the_rate() -> None:
    prev = {"at": T - 15, "received": 1000, "run_id": "a"}
    r = brun(bfacts(1600, {300: 30}, prev))
    assert r.status is Status.WARN and r.evidence_strength == "behaviour"
    assert r.summary.startswith(
        "connection churn: 40.0 new connections/s over the last 15s (600 new, 600 already "
        "closed again) against 30 clients connected; youngest from 10.0.0.9 (3), 10.0.0.5 (1)"
    )
    assert r.metrics["new_connections_per_s"] == 40.0
    assert r.carry == {"at": T, "received": 1600, "run_id": "a"}


@pytest.mark.parametrize(
    ("received", "ages", "prev", "status", "judged"),
    [
        (1000, {300: 30}, None, Status.OK, False),  # first round: say nothing
        (1600, {300: 30}, {"at": T - 15, "received": 1000, "run_id": "b"}, Status.OK, False),
        (900, {300: 30}, {"at": T - 15, "received": 1000, "run_id": "a"}, Status.OK, False),
        (None, {300: 30}, {"at": T - 15, "received": 1000, "run_id": "a"}, Status.OK, False),
        # a deploy: 60 new connections in one second, all still there
        (1060, {0: 60}, {"at": T - 1, "received": 1000, "run_id": "a"}, Status.OK, True),
        # the boundary: 10 short-lived a second is not past max_churn 10
        (1150, {300: 30}, {"at": T - 15, "received": 1000, "run_id": "a"}, Status.OK, True),
        (1151, {300: 30}, {"at": T - 15, "received": 1000, "run_id": "a"}, Status.WARN, True),
        # two rounds a second apart: the previous round's own connections (29 short-lived,
        # 58 a second) are not churn; 30 are
        (1029, {300: 30}, {"at": T - 0.5, "received": 1000, "run_id": "a"}, Status.OK, True),
        (1030, {300: 30}, {"at": T - 0.5, "received": 1000, "run_id": "a"}, Status.WARN, True),
        # a healthy pooled fleet at a 15-minute patrol: fleetcheck's own and a few scripts
        (1020, {5000: 30}, {"at": T - 900, "received": 1000, "run_id": "a"}, Status.OK, True),
    ],
)
def test_churn_rule(
    received: int | None, ages: dict[int, int], prev: Any, status: Status, judged: bool
) -> None:
    r = brun(bfacts(received, ages, prev))
    assert r.status is status, r.summary
    assert ("new_connections_per_s" in r.metrics) is judged


def test_churn_off() -> None:
    prev = {"at": T - 15, "received": 1000, "run_id": "a"}
    assert brun(bfacts(1600, {300: 30}, prev), ClientsConfig(max_churn=0)).status is Status.OK


def test_churn_beside_unknown_clients() -> None:
    prev = {"at": T - 15, "received": 1000, "run_id": "a"}
    f = replace(bfacts(1600, {300: 30}, prev), claimed=frozenset())
    r = brun(f)
    assert r.status is Status.WARN
    assert "from addresses no host claims" in r.summary and "connection churn" in r.summary


# ---------------------------------------------------------------- which hosts have a row
@pytest.mark.parametrize(
    ("addrs", "min_clients", "written", "row"),
    [
        ((ADDR,), 1, False, True),
        ((), 1, False, False),  # a bastion: no expectations, no row
        ((), 0, True, False),
        ((), 2, True, True),  # told clearly: UNKNOWN naming the missing addrs
    ],
)
def test_expectations(addrs: tuple[str, ...], min_clients: int, written: bool, row: bool) -> None:
    h = replace(
        HostConfig(name="b").with_settings(ClientsHostConfig(addrs, min_clients)),
        sources={"min_clients": "defaults"} if written else {},
    )
    assert expects_clients(h) is row
    assert (CHECK.why_no_row(h, ClientsConfig()) is None) is row


# ---------------------------------------------------------------- the table's new facts
LINE = (
    "id={id} addr={addr}:{port} laddr=10.0.0.1:6379 fd=9 name={name} age={age} idle={idle} "
    "flags={flags} db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=10 "
    "multi-mem=0 rbs=1024 rbp=0 obl=0 oll=0 omem=0 tot-mem=1800 events=r cmd={cmd} "
    "user=default redir=-1 resp=2"
)


def test_table_ages_waiting_and_quiet_from_text_and_bytes() -> None:
    rows = [
        ("10.0.0.1", "w", 5, 0, "N", "ping"),
        ("10.0.0.1", "w", 5, 40, "b", "blpop"),
        ("10.0.0.1", "s", 9, 300, "P", "subscribe"),
        ("10.0.0.2", "w", 0, 3, "N", "get"),
        ("10.0.0.2", "w", 0, 7, "N", "get"),
        ("::ffff:10.0.0.3", "x", 12, 12, "b", "xread"),
    ]
    text = "\n".join(
        LINE.format(id=i + 1, addr=a, port=1000 + i, name=n, age=age, idle=idle, flags=f, cmd=c)
        for i, (a, n, age, idle, f, c) in enumerate(rows)
    )
    for t in (read_client_table(text), ClientTable(parse_client_list(text.encode()))):
        assert t.min_idle() == {"10.0.0.1": 0, "10.0.0.2": 3, "10.0.0.3": 12}
        assert t.waiting() == {"10.0.0.1": 2, "10.0.0.2": 0, "10.0.0.3": 1}
        assert t.ages() == {"10.0.0.1": {5: 2, 9: 1}, "10.0.0.2": {0: 2}, "10.0.0.3": {12: 1}}
        assert t.behaviour_of("10.0.0.2") == ({0: 2}, 0)
        assert t.behaviour_of("nobody") == ({}, 0)
        # below a bound: only the younger clients
        assert t.ages(9) == {"10.0.0.1": {5: 2}, "10.0.0.2": {0: 2}}
        assert t.ages(5.5) == {"10.0.0.1": {5: 2}, "10.0.0.2": {0: 2}}
        assert t.ages(5) == {"10.0.0.2": {0: 2}}
        assert t.all_ages(13) == {5: 2, 9: 1, 0: 2, 12: 1}
        assert t.all_ages(0) == {}
        assert t.behaviour_of("10.0.0.1", 6) == ({5: 2}, 2)
        assert t.ages(10_000) == t.ages()


def test_age_in_another_form_is_a_number_like_any_other() -> None:
    """An age that is not canonical decimal (never seen from a server) is still its number."""
    text = LINE.format(
        id=1, addr="10.0.0.1", port=5, name="w", age="07", idle=0, flags="N", cmd="get"
    )
    table = read_client_table(text)
    assert table.ages(8) == {"10.0.0.1": {7: 1}}
    assert table.ages(7) == {}


def test_reconnect_seen_from_the_table() -> None:
    """Connections made since the previous round are counted as new, those older are not,
    and a reconnect is seen."""
    rows = [(ADDR, "w", 3, 0, "N", "get")] * 6 + [(ADDR, "w", 4000, 0, "N", "get")] * 4
    text = "\n".join(
        LINE.format(id=i + 1, addr=a, port=1000 + i, name=n, age=age, idle=idle, flags=f, cmd=c)
        for i, (a, n, age, idle, f, c) in enumerate(rows)
    )
    previous = {"at": T - 60, "n": 10}
    table = read_client_table(text)
    facts = facts_of(table, frozenset({ADDR}), {ADDR})
    assert facts.ages == {3: 6, 4000: 4}
    r = run(replace(facts, previous=previous))
    assert "reconnected" in r.summary and "6 of 10 connections new" in r.summary


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        ("worker:n8:17", "worker:n8:*"),
        ("worker-n8-3", "worker-n8-*"),
        ("celery@n8-4121", "celery@n8-*"),
        ("rq:worker:2f8a9c01d4e5", "rq:worker:*"),
        ("job-550e8400-e29b-41d4-a716-446655440000", "job-*"),
        ("w12", "w*"),
        ("host12-worker", "host12-worker"),
        ("rater", "rater"),
        ("", "(no name)"),
    ],
)
def test_name_pattern(name: str, pattern: str) -> None:
    assert name_pattern(name) == pattern


def test_config_check_lists_the_rows_not_made(tmp_path: Any) -> None:
    from tests.cli import fleetcheck

    cfg = tmp_path / "hosts.toml"
    cfg.write_text(
        '[broker]\nurl = "redis://127.0.0.1:6399/0"\n\n'
        '[[hosts]]\nname = "bastion"\n\n'
        '[[hosts]]\nname = "n8"\naddrs = ["10.0.0.8"]\n\n'
        '[[hosts]]\nname = "odd"\nmin_clients = 2\n\n'
        "[checks.clients]\n"
    )
    proc = fleetcheck("config", "check", "-c", str(cfg))
    assert proc.returncode == 0, proc.stderr
    tail = proc.stdout.split("rows not made:\n", 1)[1].splitlines()
    assert tail == [
        "  bastion: no clients row (no addrs and no min_clients written: "
        "no broker connections expected)"
    ]
