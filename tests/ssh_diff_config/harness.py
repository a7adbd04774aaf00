"""Runs one case through the real `ssh -G` and through fleetcheck, and compares them.

Why namespaces: ssh takes `~` and `~/.ssh` from the password database, not from $HOME, so a
private home needs a bind mount; `unshare -n` leaves it no network, so nothing a case does
(CanonicalizeHostname, a Match exec) can send a packet anywhere."""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fleetcheck.config.tables import SshConfig
from fleetcheck.core.errors import TransportError
from fleetcheck.transport.ssh.target import resolve_target
from fleetcheck.transport.ssh_config import Resolver, SshConfigError
from tests.ssh_diff_config.cases import Case

SSH = shutil.which("ssh")
PW = pwd.getpwuid(os.getuid())
FIELDS = (
    "host", "hostname", "user", "port", "identityfile", "identitiesonly", "proxyjump",
    "proxycommand", "connecttimeout", "hostkeyalias", "userknownhostsfile",
    "globalknownhostsfile", "stricthostkeychecking", "serveraliveinterval",
    "serveralivecountmax",
)  # fmt: skip


@dataclass
class Outcome:
    """One side's answer for one host argument: the fields, or the refusal's message."""

    fields: dict[str, object] | None
    refusal: str | None
    expanded_ids: list[str] | None = None


@contextmanager
def case_home(case: Case) -> Iterator[Path]:
    """The case's files written into a fresh private home (removed afterwards)."""
    home = Path(tempfile.mkdtemp(prefix="fleetcheck-sshdiff-"))
    try:
        (home / ".ssh").mkdir(mode=0o700)
        for rel, text in case.files.items():
            p = home / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if text.startswith("@symlink:"):
                p.symlink_to(text.removeprefix("@symlink:").replace("{home}", str(home)))
                continue
            if text == "@dir":
                p.mkdir(exist_ok=True)
                continue
            p.write_text(text.replace("{home}", str(home)).replace("{localuser}", PW.pw_name))
            p.chmod(0o600)
        for rel, mode in case.modes.items():
            (home / rel).chmod(mode)
        for rel, uid in case.owners.items():
            os.chown(home / rel, uid, -1)
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _env(case: Case, home: str) -> dict[str, str]:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": home, "SHELL": "/bin/sh",
           "LC_ALL": "C", "USER": PW.pw_name}  # fmt: skip
    env.update(case.env)
    return env


def ssh_batch(
    home: Path, case: Case, calls: list[tuple[list[str], list[str]]]
) -> list[tuple[int, str, str]]:
    """(exit status, stdout, stderr) of `ssh -G [-F main] EXTRA ARGV` for each call, all in
    one private mount and network namespace (one unshare per batch, not per call)."""
    assert SSH is not None
    out_dir = Path(tempfile.mkdtemp(prefix="fleetcheck-sshdiff-out-"))
    try:
        cfg = [] if case.default_config else ["-F", str(home / case.main)]
        # the private home over the real one and an empty system config, no network
        lines = [
            f"mount --bind {shlex.quote(str(home))} {shlex.quote(PW.pw_dir)} || exit 99",
            "mount --bind /dev/null /etc/ssh/ssh_config 2>/dev/null",
        ]
        for i, (extra, argv) in enumerate(calls):
            cmd = " ".join(shlex.quote(a) for a in [SSH, "-G", *cfg, *extra, *argv])
            o = shlex.quote(str(out_dir / str(i)))
            lines.append(f"{cmd} </dev/null >{o}.out 2>{o}.err; echo $? >{o}.rc")
        p = subprocess.run(
            ["unshare", "--mount", "--net", "--propagation", "private", "sh", "-c",
             "\n".join(lines)],
            capture_output=True, timeout=60, stdin=subprocess.DEVNULL,
            env=_env(case, PW.pw_dir),
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
        return [
            (
                int((out_dir / f"{i}.rc").read_text()),
                (out_dir / f"{i}.out").read_text(errors="replace"),
                (out_dir / f"{i}.err").read_text(errors="replace"),
            )
            for i in range(len(calls))
        ]
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def _refusal(rc: int, err: str) -> str:
    return err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"


def oracles(home: Path, case: Case) -> list[Outcome]:
    """ssh's answer for each of the case's host arguments."""
    answers = ssh_batch(home, case, [([], list(argv)) for argv in case.argvs])
    outcomes: list[Outcome] = []
    for rc, out, err in answers:
        if rc != 0:
            outcomes.append(Outcome(None, _refusal(rc, err)))
            continue
        got: dict[str, object] = {"identityfile": []}
        for line in out.splitlines():
            key, _, value = line.partition(" ")
            if key == "identityfile":
                got["identityfile"].append(value)  # type: ignore[union-attr]
            elif key in FIELDS:
                got[key] = value
        outcomes.append(Outcome({k: got.get(k) for k in FIELDS}, None))
    if case.expand_ids:
        # ssh -G prints IdentityFile unexpanded; IdentityAgent gets the same expansion
        # (~, %-tokens, ${VAR}) with the same values, so ssh itself expands each one for us
        calls: list[tuple[list[str], list[str]]] = []
        owners: list[int] = []
        for n, (argv, outcome) in enumerate(zip(case.argvs, outcomes, strict=True)):
            if outcome.fields is None:
                continue
            outcome.expanded_ids = []
            for raw in outcome.fields["identityfile"]:  # type: ignore[union-attr]
                value = f'"{raw}"' if " " in raw else raw  # one argument, as in the file
                calls.append((["-o", f"IdentityAgent={value}"], list(argv)))
                owners.append(n)
        for n, (rc, out, err) in zip(owners, ssh_batch(home, case, calls), strict=True):
            outcome = outcomes[n]
            if rc != 0:
                outcomes[n] = Outcome(None, _refusal(rc, err))
                continue
            if outcome.expanded_ids is None:  # already refused by an earlier one
                continue
            agent = [x for x in out.splitlines() if x.startswith("identityagent ")]
            outcome.expanded_ids.append(agent[0].partition(" ")[2] if agent else "")
    return outcomes


def parse_argv(argv: list[str]) -> tuple[str, str | None, int | None]:
    user = port = None
    args = list(argv)
    while args and args[0] in ("-l", "-p"):
        flag, value = args.pop(0), args.pop(0)
        if flag == "-l":
            user = value
        else:
            port = int(value)
    host = args[0]
    if host.startswith("ssh://"):
        host = host.removeprefix("ssh://")
        host, _, p = host.rpartition(":")
        port = port or int(p)
    if "@" in host:
        u, host = host.rsplit("@", 1)
        user = user or u
    return host, user, port


def ours(home: Path, case: Case, argv: list[str]) -> Outcome:
    """fleetcheck's answer, paths written as ssh sees them (its home is the real one)."""
    main = str(home / case.main)
    res = Resolver(main, home=str(home), env=_env(case, str(home)))
    host, user, port = parse_argv(argv)
    try:
        r = res.resolve(host, user=user, port=port)
        # and the Target the patrol would connect to: resolves, or refuses the same way
        target = resolve_target(argv[-1] if not argv[-1].startswith("ssh://") else host,
                                SshConfig(), res, user=user, port=port)  # fmt: skip
    except SshConfigError as e:
        return Outcome(None, str(e).replace(str(home), PW.pw_dir))
    except TransportError as e:
        return Outcome(None, e.reason.replace(str(home), PW.pw_dir))
    assert (target.hostname, target.port, target.user) == (r.hostname, r.port, r.user)
    assert target.host_key_alias == r.host_key_alias

    def norm(s: str) -> str:
        return s.replace(str(home), PW.pw_dir)

    fields: dict[str, object] = {
        "host": r.host,
        "hostname": r.hostname,
        "user": r.user,
        "port": str(r.port),
        "identityfile": list(r.identity_files_raw),
        "identitiesonly": "yes" if r.identities_only else "no",
        "proxyjump": r.proxy_jump,
        "proxycommand": r.proxy_command,
        "connecttimeout": "none" if r.connect_timeout is None else f"{r.connect_timeout:g}",
        "hostkeyalias": r.host_key_alias,
        "userknownhostsfile": norm(" ".join(r.user_known_hosts)),
        "globalknownhostsfile": " ".join(r.global_known_hosts),
        "stricthostkeychecking": r.strict_host_key_checking,
        "serveraliveinterval": str(r.server_alive_interval),
        "serveralivecountmax": str(r.server_alive_count_max),
    }
    expanded = [norm(p) for p in r.identity_files] if case.expand_ids else None
    return Outcome(fields, None, expanded)


def compare(case: Case, home: Path, argv: list[str], want: Outcome) -> str | None:
    """None when ssh's answer `want` and ours agree (or the case's documented refusal
    holds), else why not."""
    got = ours(home, case, argv)
    if case.refusal is not None:
        if want.refusal is not None:
            return f"documented refusal, but ssh refuses too ({want.refusal}): make it a case"
        if got.refusal is None or case.refusal not in got.refusal:
            return f"documented refusal {case.refusal!r} expected, fleetcheck said {got}"
        return _one_line(got.refusal, home)
    if want.refusal is not None:
        if got.refusal is None:
            return f"ssh refuses ({want.refusal}) but fleetcheck accepts: {got.fields}"
        return _one_line(got.refusal, home)
    if got.refusal is not None:
        return f"fleetcheck refuses ({got.refusal}) but ssh accepts: {want.fields}"
    if got.fields != want.fields:
        diff = {
            k: (got.fields.get(k), want.fields.get(k))  # type: ignore[union-attr]
            for k in FIELDS
            if got.fields.get(k) != want.fields.get(k)  # type: ignore[union-attr]
        }
        return f"fields differ (ours, ssh): {diff}"
    if case.expand_ids and got.expanded_ids != want.expanded_ids:
        return f"expanded identity files differ: ours {got.expanded_ids}, ssh {want.expanded_ids}"
    return None


def _one_line(message: str, home: Path) -> str | None:
    if "\n" in message:
        return f"refusal is not one line: {message!r}"
    if PW.pw_dir + "/" not in message:
        return f"refusal does not name the file: {message!r}"
    return None
