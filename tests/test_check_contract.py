"""The check contract (fleetcheck/core/check.py), held against every registered check (the list
comes from the registry), built-in and entry-point alike; and a third-party check
(tests/example_check.py) that exists only as an entry point, with a per-host key the config
builder learns from it. A broken contract names the check, what it lacks and the file to fix;
broker checks are held to it on the loopback demo fleet (no root), host checks on namespaces."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.config import ConfigError, load
from fleetcheck.core import registry, runner
from fleetcheck.core.check import Check, CheckError, Scope
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.model import UNIT_SUFFIXES, Result, Status
from tests.conftest import _require_lab
from tests.example_check import CHECK, MarkerCheck, MarkerHostConfig

ENTRY_POINTS = f"[{registry.ENTRY_POINT_GROUP}]\nexample_marker = tests.example_check:CHECK\n"


def _clear_registry() -> None:
    importlib.invalidate_caches()
    for cached in (
        registry.plugins,
        registry.available,
        registry.builtin,
        registry._declared_types,
    ):
        cached.cache_clear()


def _install_plugin(root: Path) -> str:
    """A distribution's metadata (no package installed): what `pip install` of a plugin that
    declares the entry point would leave on sys.path."""
    info = root / "fleetcheck_example-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fleetcheck-example\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    sys.path.insert(0, str(root))
    _clear_registry()
    return str(root)


def _remove_plugin(entry: str) -> None:
    sys.path.remove(entry)
    _clear_registry()


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[None]:
    entry = _install_plugin(tmp_path / "site")
    yield
    _remove_plugin(entry)


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "hosts.toml"
    p.write_text('[broker]\nurl = "redis://127.0.0.1:1/0"\n' + text)
    return p


# ---------------------------------------------------------------- the entry-point check


def test_example_check_is_loaded_only_through_the_entry_point(plugin: None) -> None:
    found = registry.find("example_marker")
    assert isinstance(found, MarkerCheck)
    assert registry.available()["example_marker"] is found
    assert registry.host_config_types(["example_marker"]) == {"example_marker": MarkerHostConfig}


def test_without_the_entry_point_the_example_check_and_its_key_are_unknown(
    tmp_path: Path,
) -> None:
    _clear_registry()
    assert registry.find("example_marker") is None
    p = write(tmp_path, '[[hosts]]\nname = "a"\nssh = "local"\nmarker = "/etc/hostname"\n')
    with pytest.raises(ConfigError, match=r"\[hosts\[0\] a\] marker: unknown key"):
        load(p, registry.config_type, registry.host_config_types)


def test_a_plugin_host_key_is_accepted_where_declared(plugin: None, tmp_path: Path) -> None:
    p = write(
        tmp_path,
        '[[hosts]]\nname = "a"\nssh = "local"\nmarker = "/etc/hostname"\n[checks.example_marker]\n',
    )
    fleet = load(p, registry.config_type, registry.host_config_types)
    assert fleet.hosts[0].settings(MarkerHostConfig).marker == "/etc/hostname"


def test_a_plugin_host_key_is_accepted_while_its_check_is_not_enabled(
    plugin: None, tmp_path: Path
) -> None:
    p = write(tmp_path, '[[hosts]]\nname = "a"\nssh = "local"\nmarker = "/etc/hostname"\n')
    fleet = load(p, registry.config_type, registry.host_config_types)
    assert fleet.hosts[0].settings(MarkerHostConfig).marker == "/etc/hostname"


def test_a_misspelled_plugin_host_key_names_file_host_and_key(plugin: None, tmp_path: Path) -> None:
    p = write(tmp_path, '[[hosts]]\nname = "a"\nssh = "local"\nmarkr = "/etc/hostname"\n')
    with pytest.raises(ConfigError) as e:
        load(p, registry.config_type, registry.host_config_types)
    message = str(e.value)
    assert message.startswith(f"{p}: [hosts[0] a] markr: unknown key (known keys: ")
    assert "marker" in message.split("known keys: ")[1]


def test_a_plugin_host_value_is_validated_by_the_plugin(plugin: None, tmp_path: Path) -> None:
    p = write(tmp_path, '[[hosts]]\nname = "a"\nssh = "local"\nmarker = "relative"\n')
    with pytest.raises(ConfigError, match=r"\[hosts\[0\] a\] marker: must be an absolute path"):
        load(p, registry.config_type, registry.host_config_types)


def test_the_example_check_patrols_through_its_own_fragment_keys(
    plugin: None, tmp_path: Path
) -> None:
    present = tmp_path / "present"
    present.write_text("")
    p = write(
        tmp_path,
        f'[[hosts]]\nname = "a"\nssh = "local"\nmarker = "{present}"\n'
        f'[[hosts]]\nname = "b"\nssh = "local"\nmarker = "{tmp_path / "absent"}"\n'
        '[[hosts]]\nname = "c"\nssh = "local"\n'
        '[checks.example_marker]\nmissing_is = "CRIT"\n',
    )
    fleet = load(p, registry.config_type, registry.host_config_types)
    report = runner.run_patrol(fleet, runner.plan(fleet, registry.available()))
    rows = {r.host: (r.status, r.summary) for r in report.results}
    assert rows == {
        "a": (Status.OK, f"marker {present} present"),
        "b": (Status.CRIT, f"marker {tmp_path / 'absent'} missing"),
    }


# ---------------------------------------------------------------- the contract, every check

IO_EVENTS = ("open", "socket.", "subprocess.", "os.", "shutil.", "urllib.", "http.")


class NoIO:
    """Records I/O audit events raised by this thread while armed (sys.addaudithook: the
    interpreter's own report of file, socket and process operations)."""

    def __init__(self) -> None:
        self.thread: int | None = None
        self.seen: list[str] = []
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.thread == threading.get_ident() and event.startswith(IO_EVENTS):
            self.seen.append(event)

    def evaluate(
        self, check: Check[Any, Any], facts: Any, item: runner.Planned, now: datetime
    ) -> Result:
        self.seen = []
        self.thread = threading.get_ident()
        try:
            return check.evaluate(facts, item.config, item.target, now)
        finally:
            self.thread = None


def metric_problems(name: str, value: Any, unit_name: str | None = None) -> list[str]:
    """Why `name` = `value` breaks the metric rules; a nested map's leaves are judged by the
    nearest key on their path that carries a unit suffix, else they must be counts."""
    if any(name.endswith(s) for s in UNIT_SUFFIXES):
        unit_name = name
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in metric_problems(str(k), v, unit_name)]
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, int | float):
        return [f"{name} = {value!r}: not a number (strings and flags belong in evidence)"]
    if unit_name is None and not isinstance(value, int):
        return [f"{name} = {value!r}: a fraction needs a unit suffix ({', '.join(UNIT_SUFFIXES)})"]
    return []


ROOT = Path(__file__).resolve().parent.parent


def home_of(check: Check[Any, Any]) -> str:
    """The file that defines `check` (relative to the repository when it is in it)."""
    path = Path(inspect.getsourcefile(type(check)) or "?").resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def declaration_problems(check: Check[Any, Any]) -> list[str]:
    """What `check` fails to declare, each naming the check, the declaration and its file."""
    name, home = check.name, home_of(check)
    problems: list[str] = []

    def lacks(what: str, why: str) -> None:
        problems.append(f"{name}: no {what} ({why}): declare it below the class header in {home}")

    if not getattr(check, "description", ""):
        lacks("`description`", "the one line `fleetcheck checks` shows")
    if check.headline is None:
        lacks("`headline`", "the metric that is each row's headline, Nagios' perfdata item")
    if f"[checks.{name}]" not in check.example.splitlines():
        lacks("`example`", f"the [checks.{name}] table hosts.example.toml shows, commented")
    if check.host_config_type is not None and not check.host_example.strip():
        lacks("`host_example`", "its per-host keys as lines of a [[hosts]] table")
    if type(check).demo_fault is Check.demo_fault:
        lacks("`demo_fault`", "how `fleetcheck demo` plants its incident")
    if not check.demo_meaning:
        lacks("`demo_meaning`", "what a non-OK row means, in the demo's words")
    try:  # every per-host key has a default: a host that sets none of them is valid
        if check.host_config_type is not None:
            check.host_config_type()
    except Exception as e:
        problems.append(f"{name}: its host_config_type() fails: {e} (every field needs a default)")
    return problems


@pytest.mark.parametrize("name", sorted(registry.available()))
def test_every_registered_check_declares_everything(name: str) -> None:
    assert declaration_problems(registry.available()[name]) == []


@pytest.mark.parametrize("name", registry._builtin_names())
def test_settings_declared_apart_are_the_checks_own(name: str) -> None:
    """A check package that declares its settings types in its `__init__` (so that validating
    a config does not import the check) declares the very types of its check, and keeps the
    check itself in `.check`; the registry answers with them either way."""
    module = importlib.import_module(f"fleetcheck.checks.{name}")
    check = registry.builtin(name)
    assert check is not None
    assert registry.config_type(check.name) is check.config_type
    host = registry.host_config_types([check.name])
    assert host == ({check.name: check.host_config_type} if check.host_config_type else {})
    if "CONFIG_TYPE" not in vars(module):
        return
    assert check.name == name  # the registry finds the settings by the check's name
    assert module.CONFIG_TYPE is check.config_type
    assert module.HOST_CONFIG_TYPE is check.host_config_type
    assert "CHECK" not in vars(module)
    assert type(check).__module__ == f"fleetcheck.checks.{name}.check"


def test_the_example_plugin_declares_everything() -> None:
    assert declaration_problems(CHECK) == []


def test_a_missing_declaration_names_the_check_the_declaration_and_the_file() -> None:
    class Bare(Check[Any, Any]):
        name = "bare"
        description = "declares nothing else"
        scope = Scope.BROKER

    problems = declaration_problems(Bare())
    assert len(problems) == 4, problems
    assert problems[0] == (
        "bare: no `headline` (the metric that is each row's headline, Nagios' perfdata item): "
        "declare it below the class header in tests/test_check_contract.py"
    )
    assert all(p.startswith("bare: no `") for p in problems)


def evaluate_demo(netns: bool) -> dict[str, Any]:
    """The demo fleet (every registered check plants its own fault, the example entry-point
    check too), each row probed for real and evaluated twice under the I/O guard."""
    from fleetcheck.lab.demo import build

    demo = build(netns=netns)
    try:
        fleet = load(demo.config, registry.config_type, registry.host_config_types)
        items = runner.plan(fleet, registry.available())
        ctx = PatrolContext(fleet, runner.fragments_for(items, fleet))
        guard = NoIO()
        now = datetime.now(UTC)  # the facts are real: judged at the time they were read
        out: dict[str, Any] = {"rows": [], "unprobed": []}
        try:
            measured: dict[str, Any] = {}
            for item in items:
                if item.check.name not in measured:  # its rows measured together, as in a patrol
                    targets = [i.target for i in items if i.check is item.check]
                    try:
                        measured[item.check.name] = item.check.probe_all(ctx, targets, item.config)
                    except CheckError as e:
                        measured[item.check.name] = {t.name if t else None: e for t in targets}
                facts = measured[item.check.name][item.key[1]]
                if isinstance(facts, CheckError):
                    out["unprobed"].append((item.key, facts.reason))
                    continue
                if isinstance(facts, Exception):
                    raise facts
                # the first call may load reference data once (tzdata, lazy imports); the
                # second must do no I/O at all and give an equal result
                first = guard.evaluate(item.check, facts, item, now)
                second = guard.evaluate(item.check, facts, item, now)
                out["rows"].append((item, first, second, list(guard.seen)))
        finally:
            ctx.close()
        return out
    finally:
        demo.lab.close()


@pytest.fixture(scope="module")
def plugin_installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    entry = _install_plugin(tmp_path_factory.mktemp("site"))
    yield
    _remove_plugin(entry)


@pytest.fixture(scope="module")
def broker_checks_evaluated(plugin_installed: None) -> dict[str, Any]:
    """Broker-scope checks on the loopback demo fleet: needs redis-server, not root."""
    from tests.lab import missing_prerequisites

    if missing_prerequisites(netns=False):
        pytest.skip("needs redis-server")
    return evaluate_demo(netns=False)


@pytest.fixture(scope="module")
def host_checks_evaluated(plugin_installed: None) -> dict[str, Any]:
    """Host checks on the namespace demo fleet (sshd per host): needs the lab."""
    _require_lab()
    return evaluate_demo(netns=True)


def contract_problems(name: str, evaluated: dict[str, Any]) -> list[str]:
    check = registry.available()[name]
    rows = [row for row in evaluated["rows"] if row[0].check.name == name]
    if not rows:
        unprobed = [reason for key, reason in evaluated["unprobed"] if key[0] == name]
        return [
            f"{name}: no row of it was probed on the demo fleet ({unprobed or 'not planned'}): "
            f"its `demo_fault` in {home_of(check)} must plant a fault and return its table"
        ]
    problems: list[str] = []
    for item, first_rows, second, io in rows:
        where = f"{item.check.name}/{item.target.name if item.target else '(broker)'}"
        if first_rows != second:
            problems.append(f"{where}: evaluate gave two results for the same facts")
        if io:
            problems.append(f"{where}: evaluate did I/O: {sorted(set(io))}")
        judged = [first_rows] if isinstance(first_rows, Result) else list(first_rows)
        if not judged:
            problems.append(f"{where}: evaluate gave no row")
        if len({r.item for r in judged}) != len(judged):
            problems.append(f"{where}: two rows of one item: {[r.label for r in judged]}")
        if len(judged) > 1 and any(r.item is None for r in judged):
            problems.append(f"{where}: one of several rows names no item")
        for first in judged:
            problems += _row_problems(check, item, where, first)
    return problems


def _row_problems(check: Any, item: Any, where: str, first: Result) -> list[str]:
    """What one row of a check breaks of the contract."""
    problems: list[str] = []
    if (first.check, first.host) != item.key:
        problems.append(f"{where}: row names {first.check}/{first.host}")
    for metric, value in first.metrics.items():
        problems += [f"{where}: {p}" for p in metric_problems(metric, value)]
    if first.metrics and first.headline is None:
        problems.append(
            f"{where}: none of its metrics {sorted(first.metrics)} is its declared "
            f"`headline` {check.headline!r} ({home_of(check)})"
        )
    if item.target is not None and re.match(rf"{re.escape(item.target.name)}\b", first.summary):
        problems.append(f"{where}: summary starts with the host name: {first.summary!r}")
    return problems


def _by_scope(scope: Scope) -> list[str]:
    return sorted(n for n, c in registry.available().items() if c.scope is scope)


@pytest.mark.lab
@pytest.mark.parametrize("name", _by_scope(Scope.BROKER))
def test_every_broker_check_keeps_the_contract(
    name: str, broker_checks_evaluated: dict[str, Any]
) -> None:
    assert contract_problems(name, broker_checks_evaluated) == []


@pytest.mark.lab
@pytest.mark.parametrize("name", [*_by_scope(Scope.HOST), "example_marker"])
def test_every_host_check_keeps_the_contract(
    name: str, host_checks_evaluated: dict[str, Any]
) -> None:
    assert contract_problems(name, host_checks_evaluated) == []


@pytest.mark.parametrize(
    ("name", "value", "broken"),
    [
        ("age_s", 1.5, False),
        ("connections", 3, False),
        ("by_addr", {"10.0.0.1": 2}, False),
        ("logs", {"/l": {"age_s": 2.5, "error_lines": 1}}, False),
        ("age", 1.5, True),  # a fraction without a unit
        ("tz", "UTC", True),
        ("consumed", True, True),
        ("samples", [1, 2], True),
        ("logs", {"/l": {"tz": "UTC"}}, True),
    ],
)
def test_the_metric_rule_itself(name: str, value: Any, broken: bool) -> None:
    assert bool(metric_problems(name, value)) is broken


def test_the_io_guard_sees_a_file_read(tmp_path: Path) -> None:
    class Reads(MarkerCheck):
        def evaluate_host(self, facts: bool, config: Any, host: Any, now: datetime) -> Result:
            (tmp_path / "x").write_text("x")
            return super().evaluate_host(facts, config, host, now)

    from fleetcheck.config import HostConfig

    check = Reads()
    host = HostConfig(name="a", ssh="local").with_settings(MarkerHostConfig("/x"))
    item = runner.Planned(check, check.config_type(), host)
    guard = NoIO()
    guard.evaluate(check, True, item, datetime.now(UTC))
    assert "open" in guard.seen
