"""Issue 22, item 1: text from the network never reaches the operator with a control in it.

One lab plays every hostile source the review named, each for real:
  - a "host" on loopback whose sshd sends 100 lines of escape sequences instead of a version
    string (tests/hostile.py; paramiko quotes the last one in its error);
  - a host whose login shell (sshd's ForceCommand) writes controls on stderr and fails the
    gathered exec;
  - a BusyBox host (its `stat` prints a file name raw in its error) with a log path full of
    controls;
  - a host with an interface named with ESC, BEL, DEL, C1 CSI and U+202E in it, carrying a
    second default route (the routes check names it);
  - the lab's real redis-server with live-hash field names and owners full of controls (the
    live_hash row and `reap-live`'s listing), and key names (`config discover`'s draft);
  - a RESP server of ours on loopback whose INFO values, client names and error replies are
    full of them (broker, queue_depth, live_hash rows; `config discover`'s error).
Then every output: the rich table under a pty (no colour, and colour with only its own SGR
sequences allowed), plain, Nagios, JSON (decoded, every string), Prometheus, the console's
pages over HTTP, `history`, and stderr of every command. Each source's row must show the
visible escape (proof the hostile text got that far) and no output may hold a raw control.

Checked to fail without each part of the fix (each undone alone, these tests run):
Result.__post_init__'s sanitising removed: the source, format, table, console and old-history
tests fail (15); the stderr writer's one_line removed: reap-live, discover, warnings, plugin and
serve tests fail; reap-live's printable removed, the HTML escaper's printable, the console's
Point/Series sanitising, Result's host, `history`'s host names, `config check --ssh`'s lines,
discover's comment escapes, parse/routes' strict=False: each fails its test here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli import fleetcheck
from tests.hostile import (
    ESCAPED,
    PAYLOAD,
    PAYLOAD_C0,
    bad_chars,
    decoded,
    hostile_broker,
    hostile_ssh,
    run_in_pty,
    strings,
)
from tests.lab import Lab
from tests.serve_util import get, serving

LAB = pytest.mark.lab  # the tests that start the lab; the others run anywhere

# 13 bytes: an interface name is at most 15; the kernel refuses only '/', ':' and whitespace
IFNAME = "e\x1b[2J\x07\x08\x7f\x9b\u202e"
LIVE_KEY = "arena:live"


def toml(text: str) -> str:
    """A TOML basic string for any text (JSON's escapes are TOML's)."""
    return json.dumps(text)


@dataclass
class World:
    lab: Lab
    config: Path  # the lab fleet with its hostile hosts
    broker_config: Path  # a fleet whose broker is the hostile RESP server
    broker_port: int
    history: Path
    dir: Path


def _hostile_shell(path: Path) -> Path:
    path.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\n' {_sh(PAYLOAD_C0.replace(chr(0), ''))} >&2\n"
        f"printf 'Welcome %s\\n' {_sh(PAYLOAD)} >&2\n"
        "exit 1\n"
    )
    path.chmod(0o755)
    return path


def _sh(text: str) -> str:
    import shlex

    return shlex.quote(text)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    from tests.conftest import _require_lab

    _require_lab()
    work = tmp_path_factory.mktemp("hostile")
    with Lab() as lab, hostile_ssh() as ssh_port, hostile_broker() as broker_port:
        shell = _hostile_shell(work / "hostile-shell")
        lab.add_host("shellfail", sshd_options=f"ForceCommand {shell}\n")
        bbox = lab.add_busybox_host("bbox")
        ifhost = lab.add_host("ifname")
        lab.add_interface(ifhost, IFNAME, 200)
        now = time.time()
        r = lab.client()
        for i in range(4):  # four stale entries, every one hostile in its name and owner
            r.hset(
                LIVE_KEY,
                f"match-{i}{PAYLOAD_C0}\nFAKE line {i}",  # and a line feed: one line each
                json.dumps({"started_at": now - 7200, "host": f"owner{i}{PAYLOAD_C0}"}),
            )
        r.hset(LIVE_KEY, "fresh", json.dumps({"started_at": now, "host": "ok"}))
        r.rpush(f"arena:queue{PAYLOAD}", "job")
        r.close()
        # a symlink loop: stat fails with its own words (not "no such file"), quoting the
        # name BusyBox-style, raw
        loop = work / ("loop" + PAYLOAD.replace("/", ""))
        loop.symlink_to(loop.name)
        log_path = str(loop)
        hosts = [
            ("shellfail", lab.hosts["shellfail"].addr, ""),
            ("bbox", bbox.addr, f'logs = [{{ path = {toml(log_path)}, max_age = "10m" }}]\n'),
            ("ifname", ifhost.addr, ""),
            ("banner", f"127.0.0.1:{ssh_port}", ""),
        ]
        body = [
            "[broker]",
            f'url = "{lab.broker_url}"',
            'connect_timeout = "2s"',
            "",
            "[ssh]",
            'user = "root"',
            f'known_hosts = "{lab.known_hosts}"',
            f'identity_file = "{lab.client_key}"',
            'connect_timeout = "3s"',
            'command_timeout = "5s"',
            "use_agent = false",
            'config_file = "/dev/null"',
            "",
            "[patrol]",
            'deadline = "40s"',
            "",
        ]
        for name, ssh, extra in hosts:
            addr = ssh.split(":")[0]
            body += [
                "[[hosts]]",
                f'name = "{name}"',
                f'ssh = "{ssh}"',
                f'addrs = ["{addr}"]',
                'tz = "UTC"',
                extra,
            ]
        body += [
            "[checks.routes]",
            "[checks.logs]",
            "[checks.live_hash]",
            f"key = {toml(LIVE_KEY)}",
            "crit_share = 0.9",
            "[checks.queue_depth]",
            f"keys = [{toml('arena:queue' + PAYLOAD)}]",
            "cap = 100",
            "samples = 1",
            "",
        ]
        config = work / "hosts.toml"
        config.write_text("\n".join(body))
        broker_config = work / "broker.toml"
        broker_config.write_text(
            "[broker]\n"
            f'url = "redis://127.0.0.1:{broker_port}/0"\n'
            'connect_timeout = "2s"\n\n[patrol]\ndeadline = "20s"\n\n'
            "[checks.broker]\n[checks.live_hash]\n"
            '[checks.queue_depth]\nkeys = ["arena:queue"]\ncap = 100\nsamples = 1\n'
        )
        history = work / "history.jsonl"
        state = work / "state.json"
        proc = fleetcheck(
            "run", "-c", str(config), "--format", "json", "--history", str(history),
            "--state", str(state),
        )  # fmt: skip
        assert proc.returncode in (1, 2, 3), proc.stderr
        assert history.with_name("history.db").exists(), proc.stderr
        yield World(lab, config, broker_config, broker_port, history, work)


def patrol_text(world: World, config: Path, fmt: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "fleetcheck", "run", "-c", str(config), "--format", fmt,
         "--no-state"],
        capture_output=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "220"},
    )  # fmt: skip
    return proc.returncode, decoded(proc.stdout), decoded(proc.stderr)


def assert_clean(what: str, text: str, allow_newline: bool = True) -> None:
    found = bad_chars(text, allow_newline)
    assert found == [], f"{what}: raw control characters reached the output: {found[:5]}"


# ---------------------------------------------------------------- the sources reach a row
@LAB
def test_each_source_reaches_its_row_escaped(world: World) -> None:
    """Not a vacuous test: each hostile source really put its text into its row, where it
    shows as a visible escape."""
    rc, out, err = patrol_text(world, world.config, "json")
    assert_clean("stderr", err)
    rows = {(r["host"], r["check"]): r for r in json.loads(out)["results"]}
    summaries = {k: r["summary"] for k, r in rows.items()}

    banner = [s for (h, _), s in summaries.items() if h == "banner"]
    assert banner and all("NOT-SSH" in s and ESCAPED in s for s in banner), banner
    shell = [s for (h, _), s in summaries.items() if h == "shellfail"]
    assert shell and all("host shell failed" in s and ESCAPED in s for s in shell), shell
    logs = summaries[("bbox", "logs")]
    # BusyBox's words, with the name it quoted raw (fleetcheck names the file itself too)
    assert "can't stat" in logs and "symbolic links" in logs and ESCAPED in logs, logs
    routes = summaries[("ifname", "routes")]
    assert "e\\x1b[2J\\x07\\x08\\x7f\\x9b\\u202e" in routes, routes
    live = rows[(None, "live_hash")]
    names = json.dumps(live["evidence"])
    assert "match-0\\\\x1b]0;PWNED" in names and "owner0\\\\x1b]0;PWNED" in names, names

    rc, out, err = patrol_text(world, world.broker_config, "json")
    assert_clean("stderr", err)
    rows = {(r["host"], r["check"]): r for r in json.loads(out)["results"]}
    broker = rows[(None, "broker")]["summary"]
    assert "m" + ESCAPED in broker and "down" + ESCAPED in broker, broker  # INFO values
    for check in ("queue_depth", "live_hash"):  # the broker's error replies
        summary = rows[(None, check)]["summary"]
        assert ESCAPED in summary and "\\x01\\x1f" in summary, (check, summary)


# ---------------------------------------------------------------- every output format
@LAB
@pytest.mark.parametrize("which", ["fleet", "broker"])
@pytest.mark.parametrize("fmt", ["plain", "nagios", "prometheus", "json"])
def test_every_text_output_is_clean(world: World, which: str, fmt: str) -> None:
    config = world.config if which == "fleet" else world.broker_config
    rc, out, err = patrol_text(world, config, fmt)
    assert rc in (1, 2, 3), err
    assert "Traceback" not in err
    assert_clean(f"--format {fmt}", out)
    assert_clean("stderr", err)
    if fmt == "json":
        assert ESCAPED in out.replace("\\\\", "\\")  # JSON doubles the backslash
        for s in strings(json.loads(out)):
            assert_clean("a JSON string", s, allow_newline=False)
    elif fmt == "prometheus":
        # only names and numbers: the hostile text is in label values (map keys), where
        # the exposition format doubles the backslash; the broker's rows have none
        if which == "fleet":
            assert "x1b]0;PWNED" in out, out
    else:
        assert ESCAPED in out, out


@LAB
@pytest.mark.parametrize("term", ["dumb", "xterm-256color"])
@pytest.mark.parametrize("which", ["fleet", "broker"])
def test_table_under_a_pty_is_clean(world: World, which: str, term: str) -> None:
    """The rich table on a real terminal (a pty): with TERM=dumb rich writes no escape of its
    own, so any ESC is the payload's; with a colour terminal only rich's own SGR sequences
    (ESC [ digits m) are allowed, everything else must be gone."""
    config = world.config if which == "fleet" else world.broker_config
    rc, out, err = run_in_pty(["run", "-c", str(config), "--no-state"], {"TERM": term})
    text = decoded(out)
    assert "STATUS" in text and "HOST" in text, text[:500]  # the table, not plain text
    if term != "dumb":
        assert "\x1b[" in text  # rich did colour it: the check below is not vacuous
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert_clean(f"table (TERM={term})", text)
    assert_clean("stderr", decoded(err))
    assert "\\x1b" in text  # the payload, escaped (rich may fold it across lines)


# ---------------------------------------------------------------- the console and history
def assert_clean_page(what: str, path: str, text: str) -> None:
    """A page's bytes hold no control; /report.json's strings, decoded, none either."""
    assert_clean(what, text)
    if path == "/report.json" and text.startswith("{"):
        for s in strings(json.loads(text)):
            assert_clean(f"{what}: a JSON string", s, allow_newline=False)


@LAB
def test_console_pages_are_clean(world: World) -> None:
    with serving("-c", str(world.config), "--history", str(world.history)) as base:
        paths = ["/", "/charts", "/report.json", "/metrics", "/healthz"]
        paths += ["/row?check=routes&host=ifname", "/row?check=logs&host=bbox"]
        paths += ["/row?check=live_hash&host=", "/row?check=x&host=%1b%5b2J%07%c2%9b"]
        paths += ["/no%1b%5b2Jpage"]
        for path in paths:
            status, _, body = get(base + path)
            assert status in (200, 404, 503), (path, status)
            text = decoded(body)
            assert_clean_page(f"GET {path}", path, text)
            if path.startswith("/row?check=routes"):
                assert status == 200 and "e\\x1b[2J" in text, text[:2000]


def _raw_history_line(path: Path) -> None:
    """A history line as an old fleetcheck (or a hand-edited file) could have written it:
    its summary, host and metric keys hold raw controls (JSON escapes, decoded on read)."""
    line = {
        "schema": "fleetcheck.history/1",
        "started_at": "2026-11-29T07:00:00Z",
        "duration_s": 1.0,
        "status": "CRIT",
        "rows": [
            {
                "check": "logs",
                "host": "old" + PAYLOAD_C0,
                "status": "CRIT",
                "summary": "last line " + PAYLOAD_C0,
                "metrics": {"age_s": 9000.0, "logs": {PAYLOAD_C0: {"age_s": 9000.0}}},
            },
            {
                "check": "clients",
                "host": "old" + PAYLOAD_C0,
                "status": "CRIT",
                "summary": PAYLOAD_C0,
                "metrics": {"connections": 0},
            },
        ],
    }
    path.write_text(json.dumps(line) + "\n")


@LAB
def test_rows_rebuilt_from_an_old_history_are_clean(world: World, tmp_path: Path) -> None:
    """console/source.py and `history` rebuild rows from a history line alone: raw controls
    in an old file come out as visible escapes."""
    history = tmp_path / "old.jsonl"
    _raw_history_line(history)
    with serving("-c", str(world.config), "--history", str(history)) as base:
        for path in ["/", "/charts", "/report.json", "/metrics", "/healthz"]:
            status, _, body = get(base + path)
            assert_clean_page(f"GET {path} (old history)", path, decoded(body))
        host = "old" + PAYLOAD_C0
        from urllib.parse import urlencode

        status, _, body = get(base + "/row?" + urlencode({"check": "logs", "host": host}))
        assert_clean("GET /row (old history)", decoded(body))
    proc = fleetcheck("history", "-c", str(world.config), "--history", str(history),
                      "--since", "100000d")  # fmt: skip
    assert_clean("history", proc.stdout)
    assert_clean("history's stderr", proc.stderr)
    assert "old\\x1b" in proc.stdout, proc.stdout


# ---------------------------------------------------------------- commands and stderr
@LAB
def test_reap_live_output_is_clean(world: World) -> None:
    """reap-live lists the stale entries by field name and owner: the workers' text."""
    proc = fleetcheck("reap-live", "-c", str(world.config), "--show", "0")
    assert proc.returncode == 0, proc.stderr
    assert_clean("reap-live", proc.stdout)
    assert_clean("reap-live's stderr", proc.stderr)
    assert "match-0\\x1b]0;PWNED" in proc.stdout and "owner0\\x1b]0;PWNED" in proc.stdout
    assert "\\x0d" in proc.stdout  # the CR became visible, it did not rewrite the line
    # one line per entry: a field name cannot start a line of its own
    listed = [line for line in proc.stdout.split("\n") if line.startswith("  match-")]
    assert len(listed) == 4, proc.stdout
    assert not any(line.startswith("FAKE") for line in proc.stdout.split("\n")), proc.stdout
    # against the hostile broker: its error reply, on stderr
    proc = fleetcheck("reap-live", "-c", str(world.broker_config))
    assert proc.returncode == 3
    assert_clean("reap-live's stderr (hostile broker)", proc.stderr)
    assert ESCAPED in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


@LAB
def test_discover_output_is_clean(world: World) -> None:
    """`config discover` against the lab's broker (hostile key names) drafts clean TOML;
    against the hostile broker (client names, then an error reply) it prints a clean error."""
    proc = fleetcheck("config", "discover", "--url", world.lab.broker_url)
    assert proc.returncode == 0, proc.stderr
    assert_clean("discover's draft", proc.stdout)
    assert_clean("discover's stderr", proc.stderr)
    # a key's name in a comment: the visible escape, as everywhere else (was "?" before)
    assert "arena:queue\\x1b]0;PWNED\\x07" in proc.stdout, proc.stdout
    import tomllib

    tomllib.loads(proc.stdout)  # still valid TOML
    url = f"redis://127.0.0.1:{world.broker_port}/0"
    proc = fleetcheck("config", "discover", "--url", url)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert_clean("discover's stderr (hostile broker)", proc.stderr)
    assert proc.stderr.startswith("fleetcheck: error: broker: ") and ESCAPED in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr


@LAB
def test_warnings_and_errors_on_stderr_are_clean(world: World, tmp_path: Path) -> None:
    """Patrol and state warnings, main's error line: paths and OS errors are text too."""
    odd = tmp_path / ("dir" + PAYLOAD.replace("/", ""))
    odd.mkdir()
    state = odd / "state.json"
    state.write_text("{not json" + PAYLOAD_C0)
    (odd / "a-file").write_text("")
    history = odd / "a-file" / "h.jsonl"  # its parent is a file: the history cannot be written
    proc = fleetcheck(
        "run", "-c", str(world.config), "--only", "routes", "--host", "ifname",
        "--state", str(state), "--history", str(history), "--format", "json",
    )  # fmt: skip
    assert_clean("patrol warnings", proc.stderr)
    # the unwritable history is said once, with the state (the patrol then keeps neither)
    assert proc.stderr.count("fleetcheck: warning: ") >= 1, proc.stderr
    assert "dir\\x1b]0;PWNED" in proc.stderr, proc.stderr
    assert_clean("--format json", proc.stdout)
    proc = fleetcheck("run", "-c", str(tmp_path / ("missing" + PAYLOAD.replace("/", "") + ".toml")))
    assert proc.returncode == 3
    assert_clean("main's error line", proc.stderr)
    assert proc.stderr.startswith("fleetcheck: error: ") and "\\x1b" in proc.stderr


def test_a_broken_plugin_is_a_clean_warning(tmp_path: Path) -> None:
    """A third-party check that fails to load: its exception text is printed as a warning
    (a real entry point in a real dist-info directory on PYTHONPATH)."""
    (tmp_path / "hostile_plugin.py").write_text(f"raise ValueError({PAYLOAD_C0!r})\n")
    dist = tmp_path / "hostile_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[fleetcheck.checks]\nhostile = hostile_plugin\n")
    env = {"PYTHONPATH": str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = fleetcheck("checks", env=env)
    assert "check plugin 'hostile' not loaded" in proc.stderr, proc.stderr
    assert_clean("plugin warning", proc.stderr)
    assert ESCAPED in proc.stderr and "\\x0d" in proc.stderr


def test_serve_patrol_failure_warning_is_clean(capfd: pytest.CaptureFixture[str]) -> None:
    """serve --every keeps serving when a round raises: the exception's text is printed."""
    import threading

    from fleetcheck.console.server import start_patrols

    stop = threading.Event()
    calls: list[int] = []

    def round_fn() -> None:
        calls.append(1)
        stop.set()
        raise RuntimeError("broker said " + PAYLOAD_C0)

    thread = start_patrols(round_fn, 3600, stop)
    thread.join(10)
    assert calls and not thread.is_alive()
    err = capfd.readouterr().err
    assert "fleetcheck: warning: patrol failed: broker said " in err, err
    assert_clean("serve's warning", err)


def test_config_check_ssh_is_clean(tmp_path: Path) -> None:
    """`config check --ssh` prints what ssh_config says (a ProxyCommand, a HostName)."""
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(f"Host w1\n  ProxyCommand nc %h %p {PAYLOAD}\n")
    cfg = tmp_path / "hosts.toml"
    cfg.write_text(
        '[broker]\nurl = "redis://127.0.0.1:1/0"\n\n'
        f'[ssh]\nconfig_file = "{ssh_config}"\n\n'
        '[[hosts]]\nname = "w1"\nssh = "w1"\naddrs = ["127.0.0.9"]\n'
    )
    proc = fleetcheck("config", "check", "--ssh", "-c", str(cfg))
    assert_clean("config check --ssh", proc.stdout)
    assert_clean("config check --ssh's stderr", proc.stderr)
    assert "\\x1b]0;PWNED" in proc.stdout, proc.stdout + proc.stderr
