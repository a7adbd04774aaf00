"""Issue 28: the dedicated-user path of docs/operations.md, run as written (every line of its
`ops-test: dedicated-user` block but `systemctl`), with every path under a scratch root and
the user named for this test: create the user, install the built wheel, write the
environment file, then `runuser -u USER -- fleetcheck run` and the unit's ExecStart line as
the unit runs it give the same rows with real verdicts: no "not set", no "Permission denied".
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab import Lab
from tests.test_wheel_install import wheel  # noqa: F401  (the module's built wheel)

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs/operations.md"
PATHS = ("/etc/default/fleetcheck", "/etc/fleetcheck", "/opt/fleetcheck", "/var/lib/fleetcheck",
         "/etc/systemd/system")  # fmt: skip


def doc_block() -> list[str]:
    text = DOC.read_text()
    m = re.search(r"<!-- ops-test: dedicated-user -->\n```sh\n(.*?)```", text, re.S)
    assert m, "docs/operations.md: no ops-test: dedicated-user block"
    return [line for line in m.group(1).splitlines() if line.strip() and not line.startswith("#")]


def localise(line: str, root: Path, user: str) -> str:
    """A doc line with its paths under `root` and its user (and group) named `user`."""
    for path in PATHS:
        line = line.replace(path, f"{root}{path}")
    line = re.sub(r"(?<=-[ugo] )fleetcheck\b", user, line)
    line = re.sub(r"(--shell \S+ )fleetcheck$", rf"\g<1>{user}", line)
    if " timer " in line and "--install" in line:
        line = line.replace("--install", f"--install --dir {root}/etc/systemd/system")
    return line


@pytest.fixture
def scratch() -> Iterator[tuple[Path, str]]:
    if os.geteuid() != 0:
        pytest.skip("needs root (useradd, runuser)")
    root = Path(tempfile.mkdtemp(prefix="fleetcheck-ops-", dir="/var/tmp"))
    root.chmod(0o755)
    for d in ("etc/default", "etc/systemd/system", "opt", "var/lib", "work/dist"):
        (root / d).mkdir(parents=True)
    user = f"fcops{secrets.token_hex(3)}"
    try:
        yield root, user
    finally:
        subprocess.run(["userdel", user], capture_output=True)
        subprocess.run(["groupdel", user], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def test_dedicated_user_path_as_documented(
    lab: Lab,
    wheel: Path,  # noqa: F811
    scratch: tuple[Path, str],
) -> None:
    root, user = scratch
    w1 = lab.add_host("w1")
    lab.start_workers(w1, 2)
    admin = lab.client()
    admin.execute_command("ACL", "SETUSER", "fcops", "on", ">ops-secret", "~*", "&*", "+@all")
    admin.close()
    work = root / "work"
    shutil.copy(wheel, work / "dist" / wheel.name)
    shutil.copy(lab.client_key, work / "id_ed25519")
    shutil.copy(lab.known_hosts, work / "known_hosts")
    etc = f"{root}/etc/fleetcheck"
    text = lab.config(checks="[checks.broker]\n[checks.clients]\n[checks.routes]\n").read_text()
    text = text.replace(str(lab.client_key), f"{etc}/id_ed25519")
    text = text.replace(str(lab.known_hosts), f"{etc}/known_hosts")
    text = text.replace('connect_timeout = "2s"\n', 'connect_timeout = "2s"\nusername = "fcops"\n'
                        'password_env = "FLEETCHECK_REDIS_PASSWORD"\n', 1)  # fmt: skip
    text = text.replace(
        "[patrol]\n", f'[patrol]\nenvironment_file = "{root}/etc/default/fleetcheck"\n'
    )
    (work / "hosts.toml").write_text(text)

    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": "/root"}
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CERT"):
        if key in os.environ:
            env[key] = os.environ[key]
    outputs: dict[str, subprocess.CompletedProcess[str]] = {}
    for line in doc_block():
        if line.startswith("systemctl "):
            continue  # needs a booted systemd
        line = localise(line.replace("'PASSWORD'", "'ops-secret'"), root, user)
        proc = subprocess.run(["bash", "-c", line], cwd=work, env=env, capture_output=True,
                              text=True, timeout=900)  # fmt: skip
        outputs[line] = proc
        if " run -c " in line:
            assert proc.returncode in (0, 1, 2), (line, proc.stdout, proc.stderr)
        else:
            assert proc.returncode == 0, (line, proc.stdout, proc.stderr)
        for bad in ("not set", "Permission denied", "Traceback"):
            assert bad not in proc.stdout + proc.stderr, (line, proc.stdout, proc.stderr)
    assert pwd.getpwnam(user).pw_dir == f"{root}/var/lib/fleetcheck"

    fleetcheck = f"{root}/opt/fleetcheck/bin/fleetcheck"
    conf = f"{etc}/hosts.toml"
    by_hand = subprocess.run(
        ["runuser", "-u", user, "--", fleetcheck, "run", "-c", conf, "--format", "json"],
        cwd="/", env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    # the unit's ExecStart line, run as the unit runs it: its user, its Environment= lines
    service = (root / "etc/systemd/system/fleetcheck.service").read_text()
    exec_start = next(x for x in service.splitlines() if x.startswith("ExecStart="))
    argv = shlex.split(exec_start.removeprefix("ExecStart=").replace("%%", "%"))
    assert argv[0] == fleetcheck and argv[1:] == ["run", "-c", conf]
    assert f"EnvironmentFile=-{root}/etc/default/fleetcheck" in service
    assert "Environment=XDG_STATE_HOME=/var/lib" in service
    unit_env = {**env, "XDG_STATE_HOME": f"{root}/var/lib"}
    by_unit = subprocess.run(
        ["runuser", "-u", user, "--", *argv, "--format", "json"],
        cwd="/", env=unit_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    rows = []
    for proc in (by_hand, by_unit):
        assert proc.returncode in (0, 1, 2), proc.stdout + proc.stderr
        for bad in ("not set", "Permission denied"):
            assert bad not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
        report = json.loads(proc.stdout)
        rows.append({(r["check"], r["host"], r["status"]) for r in report["results"]})
        assert all(r["status"] != "UNKNOWN" for r in report["results"]), report["results"]
    assert rows[0] == rows[1]
    assert ("routes", "w1", "OK") in rows[0]
    # state where each run keeps it, owned by the user, 0700
    for d in (
        Path(f"{root}/var/lib/fleetcheck"),
        Path(f"{root}/var/lib/fleetcheck/.local/state/fleetcheck"),
    ):
        st = d.stat()
        assert st.st_uid == pwd.getpwnam(user).pw_uid and st.st_mode & 0o777 == 0o700, d
