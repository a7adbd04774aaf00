"""CLI behaviour that needs no lab: usage errors, version, listing, lazy imports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetcheck", *args], capture_output=True, text=True, timeout=60
    )


def test_version() -> None:
    from fleetcheck import __version__

    proc = cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"fleetcheck {__version__}"


def test_checks_lists_clients() -> None:
    proc = cli("checks")
    assert proc.returncode == 0
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert "clients" in names


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["run", "--help"]])
def test_help_and_version_do_not_import_redis_or_paramiko(args: list[str]) -> None:
    code = (
        "import sys\n"
        "from fleetcheck.cli import main\n"
        f"sys.argv = ['fleetcheck', *{args!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('redis', 'paramiko'))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in proc.stderr, proc.stderr


# ---------------------------------------------------------------- help like a man page
def _commands() -> list[tuple[list[str], object]]:
    """Every command and group, as its argv path and its click command."""
    import typer

    from fleetcheck.cli import app

    out: list[tuple[list[str], object]] = []

    def walk(path: list[str], cmd: Any) -> None:
        out.append((path, cmd))
        if hasattr(cmd, "list_commands"):  # a group: as click lists and resolves its commands
            for name in sorted(cmd.list_commands(None)):
                walk([*path, name], cmd.get_command(None, name))

    walk([], typer.main.get_command(app))
    return out


COMMANDS = _commands()
PATHS = [path for path, _ in COMMANDS]


def test_the_walk_finds_every_command() -> None:
    names = {" ".join(p) for p in PATHS}
    assert {"", "run", "checks", "timer", "serve", "config", "config check"} <= names
    assert len(names) >= 12


@pytest.mark.parametrize("flag", ["-h", "--help"])
@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "fleetcheck")
def test_help_everywhere_names_what_each_option_takes(path: list[str], flag: str) -> None:
    proc = cli(*path, flag)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.startswith(f"Usage: fleetcheck {' '.join(path)}".rstrip())
    assert not re.search(r"<[^>\s]*>", proc.stdout), proc.stdout  # no <str>, <path>, <list[str]>
    cmd = dict((tuple(p), c) for p, c in COMMANDS)[tuple(path)]
    for param in getattr(cmd, "params", []):
        if getattr(param, "param_type_name", "") != "option" or param.is_flag:
            continue
        if "--help" in param.opts:
            continue
        longest = max(param.opts, key=len)
        # the option's line: `--every DURATION`, an upper-case word a man page would use
        m = re.search(r"^ +(?:-\w, )?" + re.escape(longest) + r" (\S+)", proc.stdout, re.M)
        assert m, (longest, proc.stdout)
        assert re.fullmatch(r"[A-Z][A-Z0-9:/_.-]*", m.group(1)), (longest, m.group(1))


def test_top_level_help_does_not_truncate_command_descriptions() -> None:
    proc = cli("--help")
    flat = " ".join(proc.stdout.split())
    commands = proc.stdout.split("Commands:")[1]
    assert not re.search(r"\.\.\.\s*$", commands, re.M), commands  # click's cut-off mark
    for path, cmd in COMMANDS:
        if len(path) != 1:
            continue
        first = " ".join((getattr(cmd, "help", "") or "").split("\n\n")[0].split())
        assert first and f"{path[0]} {first}" in flat, (path, first)


def test_the_index_of_own_commands_is_what_the_modules_register() -> None:
    """The root group resolves its own commands through `app.OWN` (name -> module); every
    command a module of fleetcheck.cli registers on the root is there under its module, in the
    order the help lists them, and nothing else is."""
    import importlib
    import pkgutil

    import fleetcheck.cli as package
    from fleetcheck.cli.app import GROUPS, OWN, app

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"fleetcheck.cli.{info.name}")
    registered = {i.name: i.callback.__module__ for i in app.registered_commands if i.callback}
    assert {n: f"fleetcheck.cli.{m}" for n, m in OWN.items()} == registered
    groups = [i.typer_instance for i in app.registered_groups]
    assert [g.info.name for g in groups if g is not None] == list(GROUPS) == ["config"]
    commands = cli("--help").stdout.split("\nCommands:\n")[1].splitlines()
    listed = [line.split()[0] for line in commands if re.match(r"  \S", line)]
    assert listed[: len(OWN)] == list(OWN)
    assert listed[: len(OWN)] == [  # the order `fleetcheck --help` has always had
        "run", "checks", "demo", "history", "explain", "timer", "doctor", "serve", "notify",
        "silence", "rules",
    ]  # fmt: skip


def test_a_command_imports_only_its_own_module_and_builds_only_itself() -> None:
    """`fleetcheck checks` imports the module that declares it (cli.run) and none of the other
    command modules, and typer builds that one command; `--help` builds them all."""
    code = (
        "import sys\n"
        "from fleetcheck.cli import app, main\n"
        "import typer.main\n"
        "built = []\n"
        "real = typer.main.get_command_from_info\n"
        "def spy(info, **kw):\n"
        "    built.append(info.name)\n"
        "    return real(info, **kw)\n"
        "typer.main.get_command_from_info = spy\n"
        "sys.argv = ['fleetcheck', *sys.argv[1:]]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "cli = sorted(m for m in sys.modules if m.startswith('fleetcheck.cli.'))\n"
        "print('SEEN', cli, sorted(built), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "checks"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "clients" in proc.stdout
    seen = proc.stderr.split("SEEN ")[1]
    assert seen.strip() == (
        "['fleetcheck.cli.app', 'fleetcheck.cli.common', 'fleetcheck.cli.run'] ['checks']"
    ), proc.stderr
    proc = subprocess.run(
        [sys.executable, "-c", code, "--help"], capture_output=True, text=True, timeout=60
    )
    seen = proc.stderr.split("SEEN ")[1]
    for module in ("serve", "timer", "config", "rules"):
        assert f"'fleetcheck.cli.{module}'" in seen, seen
    assert "'serve'" in seen and "'timer'" in seen, seen


@pytest.mark.parametrize(
    ("args", "suggested"),
    [(["rn"], "'run'"), (["probe-ratr"], "'probe-rater'"), (["config", "chek"], "'check'")],
)
def test_a_mistyped_command_is_suggested_from_every_name(args: list[str], suggested: str) -> None:
    """Suggestions know the commands not built yet, and those the checks add."""
    proc = cli(*args)
    assert proc.returncode == 3
    assert f"Did you mean {suggested}?" in proc.stderr, proc.stderr


def test_a_bad_key_in_a_check_not_run_still_fails_the_patrol(tmp_path: Path) -> None:
    """`--only broker` validates the whole file: a bad key in another check's table (one whose
    settings are declared apart from the check, so the check is not imported) is named with
    file, table and key, and the patrol does not run (exit 3)."""
    config = tmp_path / "hosts.toml"
    config.write_text(
        '[broker]\nurl = "redis://127.0.0.1:1/0"\n[checks.broker]\n'
        '[checks.rater_probe]\ntimeout = "5s"\ntimout = "5s"\n'
    )
    proc = cli("run", "-c", str(config), "--only", "broker", "--format", "json")
    assert proc.returncode == 3, proc
    assert f"{config}: [checks.rater_probe]" in proc.stderr, proc.stderr
    assert "timout" in proc.stderr, proc.stderr
    config.write_text(
        '[broker]\nurl = "redis://127.0.0.1:1/0"\n[checks.broker]\n'
        '[checks.rater_probe]\ntimeout = "500s"\n'
    )
    proc = cli("run", "-c", str(config), "--only", "broker", "--format", "json")
    assert proc.returncode == 3, proc
    assert "[checks.rater_probe]" in proc.stderr and "timeout" in proc.stderr, proc.stderr


# ---------------------------------------------------------------- usage errors: one line
@pytest.mark.parametrize(
    "args, names",
    [
        (["--bogus"], "--bogus"),
        (["run", "--bogus"], "--bogus"),
        (["run", "--format", "xml"], "--format"),
        (["run", "--rounds", "x"], "--rounds"),
        (["run", "--rounds", "0"], "--rounds"),
        (["run", "--every"], "--every"),
        (["run", "-c"], "-c"),
        (["config", "check", "--nope"], "--nope"),
        (["timer", "--name"], "--name"),
        (["nosuchcommand"], "nosuchcommand"),
        (["run", "extra-argument"], "extra-argument"),
    ],
)
def test_usage_error_is_one_line_naming_the_option(args: list[str], names: str) -> None:
    proc = cli(*args)
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("fleetcheck: error: ") and names in lines[0], lines[0]


def test_run_bogus_says_where_the_options_are_listed() -> None:
    proc = cli("run", "--bogus")
    assert proc.stderr == ("fleetcheck: error: no such option: --bogus (see `fleetcheck run -h`)\n")


DURATION_OPTIONS = [
    ["run", "--every"],
    ["serve", "--every"],
    ["serve", "--window"],
    ["timer", "--every"],
    ["history", "--since"],
    ["probe-rater", "--timeout"],
    ["reap-live", "--max-age"],
    ["reap-live", "--deadline"],
    ["silence", "--for"],
    ["rules", "--stale-after"],
    ["config", "discover", "--deadline"],
    ["doctor", "--deadline"],
]


def test_every_duration_option_is_in_the_list() -> None:
    """Each option whose help shows DURATION is one the duration tests below cover."""
    shown = set()
    for path, cmd in COMMANDS:
        for param in getattr(cmd, "params", []):
            if getattr(param, "metavar", None) == "DURATION":
                shown.add((" ".join(path), max(param.opts, key=len)))
    assert shown == {(" ".join(p[:-1]), p[-1]) for p in DURATION_OPTIONS}


@pytest.mark.parametrize("option", DURATION_OPTIONS, ids=" ".join)
@pytest.mark.parametrize(
    "value, why",
    [
        ("15min", "use 900s, 15m, 1h30m or plain seconds"),
        ("-5m", "use 900s, 15m, 1h30m or plain seconds"),
        ("0", "must be longer than 0s"),
    ],
)
def test_one_duration_type_whose_error_names_the_option(
    option: list[str], value: str, why: str
) -> None:
    proc = cli(*option, value)
    assert proc.returncode == 3
    assert proc.stderr == f"fleetcheck: error: {option[-1]}: bad duration {value!r}: {why}\n"


def test_split_list_takes_commas_and_repeats() -> None:
    from fleetcheck.cli import split_list

    assert split_list(["broker,live_hash", "clients"]) == ["broker", "live_hash", "clients"]
    assert split_list([" a , b ", ",", ""]) == ["a", "b"]
    assert split_list(None) == []


@pytest.mark.lab
def test_only_and_host_take_comma_lists(tmp_path: Path) -> None:
    """`--only a,b --host x,y` patrols exactly what the repeated form does, against a real
    broker (no SSH: the clients check reads the broker's CLIENT LIST)."""
    from tests.servers import Server

    with Server() as server:
        cfg = tmp_path / "hosts.toml"
        hosts = "".join(
            f'[[hosts]]\nname = "{n}"\nssh = "local"\naddrs = ["198.18.255.{i}"]\n\n'
            for i, n in enumerate(("a", "b", "c"), start=1)
        )
        cfg.write_text(
            f'[broker]\nurl = "{server.url}"\n\n[patrol]\ndeadline = "20s"\n\n{hosts}'
            "[checks.broker]\n[checks.clients]\n[checks.routes]\n"
        )
        base = ["run", "-c", str(cfg), "--format", "json", "--no-state"]

        def rows(*args: str) -> set[tuple[str | None, str]]:
            proc = cli(*base, *args)
            assert proc.returncode in (0, 1, 2), proc.stderr
            return {(r["host"], r["check"]) for r in json.loads(proc.stdout)["results"]}

        only = rows("--only", "clients,broker")
        assert only == rows("--only", "clients", "--only", "broker")
        assert {check for _, check in only} == {"clients", "broker"}
        hosts = rows("--only", "clients", "--host", "a,c")
        assert hosts == rows("--only", "clients", "--host", "a", "--host", "c")
        assert {host for host, _ in hosts} == {"a", "c"}
        bad = cli(*base, "--only", "clients,nosuch")
        assert bad.returncode == 3 and "nosuch" in bad.stderr
        assert len(bad.stderr.splitlines()) == 1


def test_bare_fleetcheck_prints_the_help_and_exits_3() -> None:
    """No command is a usage error (exit 3, as before); the help is what it prints."""
    proc = cli()
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr.startswith("Usage: fleetcheck [OPTIONS] COMMAND [ARGS]...")
    assert "Commands:" in proc.stderr and "fleetcheck: error" not in proc.stderr


# ---------------------------------------------------------------- a plugin with a long name
LONG_PLUGIN = """
from fleetcheck.core.check import Check, CheckCommand, CommandOption, Scope


class LongNamed(Check):
    name = "a_plugin_check_with_a_long_name"
    description = "a check whose name is longer than the built-ins' column"
    scope = Scope.BROKER


CHECK = LongNamed()

COMMANDS = (
    CheckCommand(
        name="say-long",
        help="Print the word given and exit 1.",
        run="long_plugin:say",
        options=(CommandOption("--word", "The word.", metavar="WORD"),),
    ),
)


def say(fleet, word=None):
    print(f"{word} to {len(fleet.hosts)} hosts")
    return 1
"""


def _long_plugin(root: Path) -> dict[str, str]:
    """A plugin installed as `pip install` leaves one on sys.path (metadata and module): the
    environment of a fleetcheck process that sees it."""
    import os

    info = root / "long_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: long-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[fleetcheck.checks]\na_plugin_check_with_a_long_name = long_plugin:CHECK\n"
    )
    (root / "long_plugin.py").write_text(LONG_PLUGIN)
    return {**os.environ, "PYTHONPATH": str(root)}


def test_checks_aligns_a_name_longer_than_the_built_ins(tmp_path: Path) -> None:
    env = _long_plugin(tmp_path / "site")
    proc = subprocess.run(
        [sys.executable, "-m", "fleetcheck", "checks"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    longest = "a_plugin_check_with_a_long_name"
    assert f"{longest} broker  a check whose name is longer than the built-ins' column" in lines
    assert "broker" in [line.split()[0] for line in lines]
    # every line's scope starts in the one column after the longest name
    assert {line[len(longest) + 1 :].split()[0] for line in lines} <= {"broker", "host"}
    assert all(line[len(longest)] == " " for line in lines)
    assert all(line[: len(longest)].rstrip() == line.split()[0] for line in lines)


def test_a_plugin_command_runs_by_name(tmp_path: Path) -> None:
    """A plugin's command is found by its name (reading the entry points for `--help` would
    cost every listing tens of milliseconds, so the listing has the built-ins' only)."""
    env = _long_plugin(tmp_path / "site")
    cfg = tmp_path / "hosts.toml"
    cfg.write_text('[broker]\nurl = "redis://127.0.0.1:1/0"\n')
    args = [sys.executable, "-m", "fleetcheck", "say-long", "-c", str(cfg), "--word", "hello"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "hello to 0 hosts\n", "")
    proc = subprocess.run([*args[:4], "--help"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0
    assert "Print the word given and exit 1." in proc.stdout
    assert "--word WORD" in proc.stdout and "-c, --config FILE" in proc.stdout
    proc = subprocess.run([*args[:3], "--help"], capture_output=True, text=True, env=env)
    assert "say-long" not in proc.stdout and "probe-rater" in proc.stdout


def test_help_lists_the_commands_the_checks_declare_without_importing_a_check() -> None:
    code = (
        "import sys\n"
        "from fleetcheck.cli import main\n"
        "sys.argv = ['fleetcheck', '--help']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('CHECKS', sorted(m for m in sys.modules if m.startswith('fleetcheck.checks.')),"
        " file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "CHECKS []" in proc.stderr, proc.stderr
    commands = proc.stdout.split("\nCommands:\n")[1].splitlines()
    listed = [line.split()[0] for line in commands if re.match(r"  \S", line)]
    assert listed[-3:] == ["probe-rater", "reap-live", "config"], listed


def test_the_listing_read_from_the_source_is_what_the_checks_declare() -> None:
    """`fleetcheck --help` lists the check commands from their source text; that must be the
    very declarations the checks make (name, help and the module that declares them)."""
    import importlib

    from fleetcheck.core import registry
    from fleetcheck.core.check import CheckCommand
    from fleetcheck.core.command_index import command_listing

    listed = command_listing()
    assert set(listed) == {"probe-rater", "reap-live"}
    for name, (help_text, module) in listed.items():
        declared = [c for c in importlib.import_module(module).COMMANDS if c.name == name]
        assert len(declared) == 1 and isinstance(declared[0], CheckCommand)
        assert declared[0].help == help_text
        assert registry.check_command(name) == declared[0]
    assert registry.check_command("no-such-command") is None


def test_only_the_registry_imports_a_check() -> None:
    """No module of fleetcheck/ imports fleetcheck.checks but the registry's loader and its
    command index (which imports only the package, to find the folder whose text it reads)."""
    root = Path(__file__).resolve().parent.parent / "fleetcheck"
    naming = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if re.search(r"^\s*(from|import) fleetcheck\.checks", p.read_text(), re.M)
    )
    assert naming == ["core/command_index.py", "core/registry.py"], naming
