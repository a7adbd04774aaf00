"""Issue 28 item 1: one environment wherever fleetcheck runs. The service's environment file
([patrol] environment_file) is read by the CLI itself, as systemd's EnvironmentFile= reads
it; the state directory is made on first use or named with the command that makes it."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetcheck import envfile
from tests.cli import fleetcheck
from tests.servers import Server, fleet_toml


@pytest.mark.parametrize(
    "text, values, problems",
    [
        ("A=1\nB=two words\n", {"A": "1", "B": "two words"}, []),
        ("# comment\n; also\n\n  C = 3  \n", {"C": "3"}, []),
        ("D='it''s'\n", {"D": "its"}, []),
        ('E="a \\"q\\" b"\n', {"E": 'a "q" b'}, []),
        ("F='#not a comment'\n", {"F": "#not a comment"}, []),
        ("G=one\\\ntwo\n", {"G": "onetwo"}, []),
        ("export H=1\n", {}, [(1, "the name before '=' is not a variable name, ignored")]),
        ("just words\nI=1\n", {"I": "1"}, [(1, "not a KEY=VALUE line, ignored")]),
        ('J="open\n', {}, [(1, "a double quote is not closed, ignored")]),
        ("K='open\n", {}, [(1, "a single quote is not closed, ignored")]),
        ("1X=1\n", {}, [(1, "the name before '=' is not a variable name, ignored")]),
        ("L=\n", {"L": ""}, []),
        ("M=a=b\n", {"M": "a=b"}, []),
    ],
)
def test_parse_reads_as_systemd_does(
    text: str, values: dict[str, str], problems: list[tuple[int, str]]
) -> None:
    parsed = envfile.parse(text)
    assert parsed.values == values
    assert parsed.problems == problems


def test_set_variables_win_and_a_bad_line_is_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "env"
    path.write_text("A=from-file\nB=from-file\nnonsense here\n")
    env = {"A": "already"}
    warnings = envfile.load(str(path), ["A"], env)
    assert env == {"A": "already", "B": "from-file"}
    assert warnings == [f"environment file {path} line 3: not a KEY=VALUE line, ignored"]


def test_missing_file_is_silent_and_empty_path_reads_nothing(tmp_path: Path) -> None:
    env: dict[str, str] = {}
    assert envfile.load(str(tmp_path / "none"), ["X"], env) == [] and env == {}
    assert envfile.load("", ["X"], env) == []


def test_config_key_must_be_absolute(tmp_path: Path) -> None:
    conf = tmp_path / "hosts.toml"
    conf.write_text(fleet_toml('url = "redis://127.0.0.1:1"', extra='environment_file = "env"'))
    proc = fleetcheck("config", "check", "-c", str(conf))
    assert proc.returncode == 3
    assert "[patrol] environment_file: must be an absolute path" in proc.stderr


def test_config_check_warns_when_password_env_is_unset(tmp_path: Path) -> None:
    conf = tmp_path / "hosts.toml"
    broker = 'url = "redis://127.0.0.1:1"\npassword_env = "FC_T_UNSET_PW"'
    conf.write_text(fleet_toml(broker, extra=f'environment_file = "{tmp_path}/env"'))
    proc = fleetcheck("config", "check", "-c", str(conf))
    assert proc.returncode == 0, proc.stderr
    assert (
        "[broker] password_env names $FC_T_UNSET_PW, which is set neither in the environment "
        f"nor in {tmp_path}/env"
    ) in proc.stderr
    (tmp_path / "env").write_text("FC_T_UNSET_PW=secret-in-file\n")
    proc = fleetcheck("config", "check", "-c", str(conf))
    assert "FC_T_UNSET_PW" not in proc.stderr and "secret-in-file" not in proc.stdout


@pytest.mark.lab
def test_run_reads_the_environment_file(tmp_path: Path) -> None:
    """The password lives only in the environment file: the broker rows are judged."""
    with Server(["--requirepass", "pw-only-in-the-file"]) as server:
        conf = tmp_path / "hosts.toml"
        broker = f'url = "{server.url}"\npassword_env = "FC_T_PW"'
        env_file = tmp_path / "env"
        conf.write_text(fleet_toml(broker, extra=f'environment_file = "{env_file}"'))
        env_file.write_text("# the service's secrets\nFC_T_PW='pw-only-in-the-file'\nbad line\n")
        proc = fleetcheck("run", "-c", str(conf), "--format", "json", "--no-state")
        import json

        rows = json.loads(proc.stdout)["results"]
        assert rows and all(r["status"] != "UNKNOWN" for r in rows), rows
        assert proc.stderr.strip() == (
            f"fleetcheck: warning: environment file {env_file} line 3: not a KEY=VALUE line, "
            "ignored"
        )
        # a variable already set wins over the file
        proc = fleetcheck(
            "run", "-c", str(conf), "--format", "json", "--no-state", env={"FC_T_PW": "wrong"}
        )
        rows = json.loads(proc.stdout)["results"]
        assert any(r["status"] == "UNKNOWN" for r in rows)


def nobody() -> pwd.struct_passwd:
    return pwd.getpwnam("nobody")


ROOT = Path(__file__).resolve().parent.parent
SITE = next((ROOT / ".venv/lib").glob("python3*/site-packages"), None)


def as_nobody(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`fleetcheck ARGV` as nobody, with the system python (this venv's may live under
    /root) and this tree and its venv's packages on the path."""
    user = nobody()
    start = (
        "import runpy, site, sys; site.addsitedir(sys.argv.pop(1)); "
        "runpy.run_module('fleetcheck', run_name='__main__')"
    )
    cmd = ["/usr/bin/python3", "-c", start, str(SITE), *argv]
    return subprocess.run(
        ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", *cmd],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **env},
        cwd="/",
    )


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user can walk into (pytest's tmp dirs are 0700), removed after."""
    if os.geteuid() != 0 or SITE is None or not Path("/usr/bin/python3").exists():
        pytest.skip("needs root, a venv and /usr/bin/python3")
    d = Path(tempfile.mkdtemp(prefix="fleetcheck-envtest-", dir="/var/tmp"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_state_directory_problem_is_one_line_with_its_fix(open_dir: Path) -> None:
    """A home that was never created (useradd --system): one line naming the directory and
    the command that makes it, never "Permission denied" twice; the patrol still judges."""
    tmp_path = open_dir
    conf = tmp_path / "hosts.toml"
    conf.write_text(fleet_toml('url = "redis://127.0.0.1:1"', extra='environment_file = ""'))
    conf.chmod(0o644)
    locked = tmp_path / "root-only"
    locked.mkdir(mode=0o755)
    env = {"HOME": str(locked / "home")}
    proc = as_nobody(["run", "-c", str(conf)], env)
    lines = proc.stderr.strip().splitlines()
    group = __import__("grp").getgrgid(nobody().pw_gid).gr_name
    assert lines == [
        f"fleetcheck: warning: state directory {locked}/home/.local/state/fleetcheck cannot be "
        f"created (Permission denied): as root, install -d -o nobody -g {group} -m 0700 "
        f"{locked}/home; this patrol keeps no state and no history"
    ], proc.stderr
    assert "broker" in proc.stdout
    # made as that command says, the next run creates the rest, 0700, its own
    subprocess.run(
        ["install", "-d", "-o", "nobody", "-g", group, "-m", "0700", str(locked / "home")],
        check=True,
    )
    proc = as_nobody(["run", "-c", str(conf)], env)
    assert proc.stderr == "", proc.stderr
    made = locked / "home/.local/state/fleetcheck"
    st = made.stat()
    assert st.st_uid == nobody().pw_uid and st.st_mode & 0o777 == 0o700
    assert list(made.glob("state-*.json"))


def test_unreadable_environment_file_names_its_fix(open_dir: Path) -> None:
    tmp_path = open_dir
    conf = tmp_path / "hosts.toml"
    env_file = tmp_path / "env"
    env_file.write_text("FC_T_PW=x\n")
    env_file.chmod(0o600)
    broker = 'url = "redis://127.0.0.1:1"\npassword_env = "FC_T_PW"'
    conf.write_text(fleet_toml(broker, extra=f'environment_file = "{env_file}"'))
    conf.chmod(0o644)
    proc = as_nobody(["config", "check", "-c", str(conf)], {"HOME": "/nonexistent"})
    group = __import__("grp").getgrgid(nobody().pw_gid).gr_name
    assert (
        f"fleetcheck: warning: environment file {env_file}: cannot read (Permission denied), "
        f"so $FC_T_PW is not set; as root: chgrp {group} {env_file} && chmod 0640 {env_file}"
    ) in proc.stderr.splitlines(), proc.stderr
