"""The runner's guarantees, with small in-test checks (no I/O to fake): a broken check is
UNKNOWN for its own row only, a hung one is cut at the deadline, --only/--host narrow."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime

import pytest

from fleetcheck.config import BrokerConfig, FleetConfig, HostConfig, PatrolConfig, SshConfig
from fleetcheck.core.check import Check, HostCheck, Scope
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.errors import CheckError
from fleetcheck.core.model import Result, Status
from fleetcheck.core.runner import plan, run_patrol
from fleetcheck.parse.gathered import parse_gathered
from fleetcheck.transport.gather import build_gather_script
from fleetcheck.transport.local import LocalShell
from tests.hang import returns_within

RELEASE = threading.Event()
HUNG_LEFT = threading.Event()  # set when the hung probe has left its wait


@dataclass(frozen=True)
class Cfg:
    fail_on: str = ""
    hang_on: str = ""


class Probe(HostCheck[Cfg, str]):
    name = "probe"
    description = "test check"
    config_type = Cfg

    def probe_host(self, ctx: PatrolContext, host: HostConfig, config: Cfg) -> str:
        if host.name == config.fail_on:
            raise ZeroDivisionError("boom")
        if host.name == config.hang_on:
            RELEASE.wait(30)
            HUNG_LEFT.set()
        if host.name == "cannot":
            raise CheckError("could not look: permission denied")
        return host.name

    def evaluate_host(self, facts: str, config: Cfg, host: HostConfig, now: datetime) -> Result:
        return self.result(host, Status.OK, f"{facts} fine")


class Wide(Check[Cfg, int]):
    name = "wide"
    description = "broker-wide test check"
    scope = Scope.BROKER
    config_type = Cfg

    def probe(self, ctx: PatrolContext, host: HostConfig | None, config: Cfg) -> int:
        return 1

    def evaluate(self, facts: int, config: Cfg, host: HostConfig | None, now: datetime) -> Result:
        return self.result(host, Status.WARN, "wide row")


def fleet(cfg: Cfg, names: list[str], deadline: float = 20) -> FleetConfig:
    return FleetConfig(
        path="test.toml",
        broker=BrokerConfig(url="redis://127.0.0.1:1/0"),
        ssh=SshConfig(),
        patrol=PatrolConfig(deadline=deadline),
        hosts=tuple(HostConfig(name=n, ssh="local") for n in names),
        checks={"probe": cfg, "wide": cfg},
    )


CHECKS: dict[str, Check] = {"probe": Probe(), "wide": Wide()}


def test_exception_becomes_unknown_for_that_row_only() -> None:
    f = fleet(Cfg(fail_on="b"), ["a", "b", "c", "cannot"])
    report = run_patrol(f, plan(f, CHECKS))
    by_host = {(r.check, r.host): r for r in report.results}
    assert by_host[("probe", "a")].status is Status.OK
    assert by_host[("probe", "c")].status is Status.OK
    bad = by_host[("probe", "b")]
    assert bad.status is Status.UNKNOWN
    assert "internal error in check probe: ZeroDivisionError: boom" == bad.summary
    assert by_host[("probe", "cannot")].summary == "could not look: permission denied"
    assert by_host[("wide", None)].status is Status.WARN
    assert report.exit_code == 3
    # every row that is not OK says how strong its evidence is, whoever built it
    for r in report.results:
        assert r.status is Status.OK or r.evidence_strength is not None, r
    assert bad.evidence_strength == "absence"


def test_hung_check_is_cut_at_deadline() -> None:
    RELEASE.clear()
    HUNG_LEFT.clear()
    try:
        f = fleet(Cfg(hang_on="b"), ["a", "b"], deadline=1.0)
        # a hang guard (20x the deadline, below the probe's 30 s wait): not a timing
        report = returns_within(20, lambda: run_patrol(f, plan(f, CHECKS)), "run_patrol")
        # the deadline, not the check, ended it: the probe is still in its wait
        assert not HUNG_LEFT.is_set(), "the patrol waited for the hung probe"
    finally:
        RELEASE.set()
    by_host = {(r.check, r.host): r for r in report.results}
    assert by_host[("probe", "a")].status is Status.OK
    assert by_host[("probe", "b")].status is Status.UNKNOWN
    assert "patrol deadline (1s)" in by_host[("probe", "b")].summary
    assert by_host[("probe", "b")].evidence_strength == "absence"
    assert (
        by_host[("probe", "b")].cause == "the patrol deadline (1s) came before these rows finished"
    )


def test_only_and_host_narrow_the_plan() -> None:
    f = fleet(Cfg(), ["a", "b"])
    assert {
        (p.check.name, p.target.name if p.target else None)
        for p in plan(f, CHECKS, ["probe"], ["b"])
    } == {("probe", "b")}
    assert {p.key for p in plan(f, CHECKS, ["wide"])} == {("wide", None)}
    with pytest.raises(ValueError, match="--host zz: no such host"):
        plan(f, CHECKS, hosts=["zz"])
    with pytest.raises(ValueError, match="--only nope: no such check"):
        plan(f, CHECKS, only=["nope"])


def test_gather_script_runs_fragments_in_one_exec() -> None:
    nasty = "printf '@@0000 end x 0\\n'; echo out; exit 7"
    frags = {"a.one": "echo hello; echo world", "b.two": nasty, "c.three": "cat"}
    script = build_gather_script("deadbeefcafe0001", frags)
    before = time.time()
    result = LocalShell().run(script, 5, 1 << 20)
    after = time.time()
    parsed, epoch = parse_gathered("deadbeefcafe0001", result.stdout)
    assert parsed["a.one"].text == "hello\nworld\n" and parsed["a.one"].rc == 0
    assert parsed["b.two"].rc == 7 and parsed["b.two"].text == "@@0000 end x 0\nout\n"
    assert parsed["c.three"].text == "" and parsed["c.three"].rc == 0  # stdin is /dev/null
    # the host's epoch is now: read between our two readings (it has whole seconds)
    assert epoch is not None and int(before) <= epoch <= after, (before, epoch, after)


def test_local_shell_deadline_and_byte_bound() -> None:
    shell = LocalShell()
    r = shell.run("echo start; exec sleep 30", 0.5, 1024)
    assert r.rc is None and r.stdout == b"start\n"
    r = shell.run("head -c 100000 /dev/zero", 5, 1000)
    assert r.truncated and len(r.stdout) == 1000 and r.rc == 0


class Nobody(HostCheck[Cfg, str]):
    """A host check whose targets are the hosts named "x": none in these fleets."""

    name = "nobody"
    description = "test check with no targets"
    config_type = Cfg
    no_targets_reason = "no host is called x"

    def targets(self, fleet: FleetConfig, config: Cfg) -> list[HostConfig | None]:
        return [h for h in fleet.hosts if h.name == "x"]

    def probe_host(self, ctx: PatrolContext, host: HostConfig, config: Cfg) -> str:
        raise AssertionError("never probed: it has no targets")


def test_a_check_with_no_targets_is_one_unknown_row_saying_why() -> None:
    f = fleet(Cfg(), ["a"])
    f = FleetConfig(**{**f.__dict__, "checks": {"nobody": Cfg(), "wide": Cfg()}})
    report = run_patrol(f, plan(f, {**CHECKS, "nobody": Nobody()}))
    rows = {(r.check, r.host): r for r in report.results}
    assert set(rows) == {("nobody", None), ("wide", None)}
    assert rows[("nobody", None)].status is Status.UNKNOWN
    assert rows[("nobody", None)].summary == "no host is called x"
    assert rows[("nobody", None)].evidence_strength == "absence"
    assert report.exit_code == 3  # never a silent OK


def test_with_no_reason_declared_the_row_says_what_was_missing() -> None:
    f = fleet(Cfg(), [])
    report = run_patrol(f, plan(f, CHECKS))
    rows = {(r.check, r.host): r for r in report.results}
    assert rows[("probe", None)].summary == "no host to check: no host in test.toml has ssh set"
    assert rows[("probe", None)].status is Status.UNKNOWN
    assert rows[("wide", None)].status is Status.WARN  # the others still run


def test_naming_hosts_narrows_without_complaining_about_empty_checks() -> None:
    f = fleet(Cfg(), ["a"])
    f = FleetConfig(**{**f.__dict__, "checks": {"nobody": Cfg(), "probe": Cfg()}})
    keys = {p.key for p in plan(f, {**CHECKS, "nobody": Nobody()}, hosts=["a"])}
    assert keys == {("probe", "a")}


def test_the_runner_fills_the_declared_headline_of_a_row_built_directly() -> None:
    class Direct(Wide):
        name = "direct"
        headline = "depth"

        def evaluate(
            self, facts: int, config: Cfg, host: HostConfig | None, now: datetime
        ) -> Result:
            return Result("direct", None, Status.OK, "x", {"samples": 3, "depth": facts})

    f = fleet(Cfg(), [])
    f = FleetConfig(**{**f.__dict__, "checks": {"direct": Cfg()}})
    report = run_patrol(f, plan(f, {"direct": Direct()}))
    assert [r.headline for r in report.results] == ["depth"]
