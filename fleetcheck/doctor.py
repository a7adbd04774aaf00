"""`fleetcheck doctor` (and `config check --connect`): prove that the user it runs as, with the
config and environment the timer uses, can see everything a patrol looks at, and say what to fix
where it cannot. Writes nothing, within the patrol deadline:
1. The broker: connect, then queue every command the enabled checks declare inside a MULTI that
   is DISCARDed: the server checks a queued command's ACL (command and keys) and never runs it
   (ACL DRYRUN when MULTI is refused).
2. Each host: a new SSH connection (known_hosts never added to), then `true` through the login
   shell, timed: its startup files run before every command of every patrol.
3. A patrol of the checks that only read, with no state, history or outputs: every UNKNOWN row
   is something the patrol could not see.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleetcheck.config import FleetConfig, HostConfig
from fleetcheck.core.check import BrokerCommand, cmd

SLOW_STARTUP_S = 1.0  # a login shell slower than this to start costs every patrol that much
# commands that open or close a transaction: doctor's own MULTI proves MULTI, an empty
# MULTI ... EXEC proves EXEC; none of them can be queued inside a MULTI
TRANSACTION = ("multi", "exec", "discard")
CONNECTION = "the connection"  # who needs PING: every patrol's connection, before any check


@dataclass(frozen=True)
class Need(BrokerCommand):
    """One command a check sends (its `broker_commands` declaration) and the check."""

    check: str = CONNECTION

    @classmethod
    def of(cls, check: str, command: BrokerCommand) -> Need:
        return cls(command.words, command.writes, check)


def broker_needs(fleet: FleetConfig) -> list[Need]:
    """Every command the enabled checks declare they send (`Check.broker_commands`), the
    connection's PING first, each once (named with the first check that declares it)."""
    from fleetcheck.core import registry

    checks = registry.select(list(fleet.checks))
    needs = [Need.of(CONNECTION, cmd("PING"))]
    for name, config in fleet.checks.items():
        if name in checks:
            needs += [Need.of(name, c) for c in checks[name].broker_commands(fleet, config)]
    seen: set[tuple[str, ...]] = set()
    out = []
    for need in needs:
        if need.args not in seen:
            seen.add(need.args)
            out.append(need)
    return out


def writers(fleet: FleetConfig) -> set[str]:
    """The enabled checks that write to the broker (a `writes` command): proven by the ACL
    step only, never run by doctor's patrol."""
    return {n.check for n in broker_needs(fleet) if n.writes}


@dataclass
class Findings:
    lines: list[str] = dataclasses.field(default_factory=list)
    problems: int = 0

    def ok(self, text: str) -> None:
        self.lines.append(text)

    def problem(self, text: str, fix: str) -> None:
        self.lines.append(f"{text}: fix: {fix}" if fix else text)
        self.problems += 1


def broker_user(fleet: FleetConfig) -> str:
    from urllib.parse import unquote, urlsplit

    b = fleet.broker
    if b.username:
        return b.username
    try:
        user = urlsplit(b.url or "").username
    except ValueError:
        user = None
    return unquote(user) if user else "default"


def broker_fix(reason: str, fleet: FleetConfig) -> str:
    """The fix for a broker that did not let us in, by what it said."""
    b = fleet.broker
    low = reason.lower()
    env_file = fleet.patrol.environment_file
    refused = ("wrongpass", "invalid username-password", "noauth")
    if any(w in low for w in refused) or ("auth" in low and "password" in low):
        if b.password_env:
            where = f" (in {env_file}, readable by this user)" if env_file else ""
            user = broker_user(fleet)
            return f"set ${b.password_env}{where} to the password of broker user {user}"
        if b.password_file:
            return f"put the password of broker user {broker_user(fleet)} in {b.password_file}"
        return "give the broker's password: [broker] password_env or password_file"
    if "certificate" in low or "ssl" in low or "tls" in low:
        return (
            "[broker] ca_file must name the CA that signed the broker's certificate, and the "
            "url the name in it"
        )
    if "noperm" in low:
        return f"grant broker user {broker_user(fleet)} what the checks need (docs/brokers.md: ACL)"
    return "check [broker] url and that the broker listens there from this machine"


def check_acl(client: Any, needs: list[Need], user: str, found: Findings, where: str) -> bool:
    """Queue every need inside MULTI and DISCARD it; one problem line per refused command.
    False when the server would not let us ask (no MULTI): then ACL DRYRUN is tried."""
    import redis

    conn = client.connection_pool.get_connection()
    refused: list[tuple[Need, str]] = []
    try:
        conn.send_command("MULTI")
        try:
            conn.read_response()
        except redis.ResponseError:
            return False
        for need in needs:
            if need.name in TRANSACTION:
                continue
            conn.send_command(*need.args)
            try:
                conn.read_response()
            except redis.ResponseError as e:
                if _refused(str(e)):
                    refused.append((need, str(e)))
        conn.send_command("DISCARD")
        conn.read_response()
        execs = [n for n in needs if n.name == "exec"]
        if execs:  # an empty transaction: EXEC runs nothing
            conn.send_command("MULTI")
            conn.read_response()
            conn.send_command("EXEC")
            try:
                conn.read_response()
            except redis.ResponseError as e:
                if not _refused(str(e)):
                    raise
                refused.append((execs[0], str(e)))
                conn.send_command("DISCARD")
                conn.read_response()
    except Exception:
        conn.disconnect()
        raise
    finally:
        client.connection_pool.release(conn)
    _report_refused(refused, user, found, where)
    return True


def check_acl_dryrun(
    client: Any, needs: list[Need], user: str, found: Findings, where: str
) -> bool:
    """The same through ACL DRYRUN (Redis 7+); False when that is not allowed either."""
    import redis

    refused = []
    for need in needs:
        try:
            reply = client.execute_command("ACL", "DRYRUN", user, *need.args)
        except redis.ResponseError:
            return False
        text = reply.decode() if isinstance(reply, bytes) else str(reply)
        if text.upper() != "OK":
            refused.append((need, text))
    _report_refused(refused, user, found, where)
    return True


def _report_refused(
    refused: list[tuple[Need, str]], user: str, found: Findings, where: str
) -> None:
    for need, _ in refused:
        keys = list(need.keys)
        on = f" on {', '.join(keys)}" if keys else ""
        rule = " ".join([f"+{need.name}", *(f"~{k}" for k in keys)])
        found.problem(
            f"broker {where}: user {user} may not run {need.name.replace('|', ' ').upper()}{on} "
            f"({need.check} needs it)",
            f"ACL SETUSER {user} {rule} (on the broker, as an admin)",
        )


def check_broker(fleet: FleetConfig, found: Findings) -> bool:
    """Step 1; True when the broker let us in (so its rows in step 3 are worth reading)."""
    from fleetcheck.core.brokerlink import BrokerLink
    from fleetcheck.core.errors import CheckError
    from fleetcheck.core.memo import Memo

    link = BrokerLink(fleet, Memo())
    where = fleet.broker.address
    try:
        try:
            client = link.broker()
        except CheckError as e:
            found.problem(e.reason, broker_fix(e.reason, fleet))
            return False
        if link.master is not None:
            where = f"{link.master[0]}:{link.master[1]} (master of {fleet.broker.service})"
        needs = broker_needs(fleet)
        user = broker_user(fleet)
        before = found.problems
        try:
            asked = check_acl(client, needs, user, found, where) or check_acl_dryrun(
                client, needs, user, found, where
            )
        except Exception as e:
            reason = link.broker_error(e).reason
            found.problem(f"broker {where}: {reason}", broker_fix(reason, fleet))
            return True
        if not asked:
            writes = [n for n in needs if n.writes]
            if writes:
                found.ok(
                    f"broker {where}: note: user {user} may run neither MULTI nor ACL DRYRUN, so "
                    f"whether it may {writes[0].name.upper()} for {writes[0].check} is not "
                    "proven (the patrol's own row will say NOPERM if not)"
                )
        if found.problems == before:
            tls = "TLS" if (fleet.broker.url or "").startswith("rediss") else "no TLS"
            found.ok(
                f"broker {where}: ok (user {user}, {tls}; the {len(needs)} commands the "
                "checks send are allowed)"
            )
        return True
    finally:
        link.close()


@dataclass
class HostLogin:
    host: HostConfig
    problem: str | None = None
    fix: str = ""
    login_s: float | None = None
    startup_s: float | None = None


def host_fix(reason: str, fleet: FleetConfig, host: HostConfig) -> str:
    """The fix for a host we could not log in to, by what went wrong."""
    low = reason.lower()
    known = fleet.ssh.known_hosts_files[0]
    if "is not in" in low and "host key" in low:
        return (
            f"verify the key's fingerprint, then add it to {known} as this user (ssh -o "
            f"UserKnownHostsFile={known} {host.ssh or host.name} once, or ssh-keyscan)"
        )
    if "host key changed" in low or "revoked" in low:
        return "find out why the host's key changed before you replace its known_hosts line"
    if "authentication refused" in low or "authentication to" in low:
        return (
            "add the public half of [ssh] identity_file to the login user's "
            "~/.ssh/authorized_keys on the host"
        )
    if "cannot read" in low or "permission denied" in low:
        return "make the file readable by this user (chown it to the user the timer runs as)"
    return "check that the host is up and its sshd reachable from this machine (ssh -v)"


def check_login(fleet: FleetConfig, connector: Any, host: HostConfig) -> HostLogin:
    """Step 2 for one host: connect, then `true` through the login shell, timed."""
    from fleetcheck.core.errors import TransportError

    out = HostLogin(host)
    if host.is_local:
        return out
    try:
        start = time.monotonic()
        shell = connector.open(host)
        out.login_s = time.monotonic() - start
    except Exception as e:
        out.problem = e.reason if isinstance(e, TransportError) else f"ssh: {type(e).__name__}: {e}"
        out.fix = host_fix(out.problem, fleet, host)
        return out
    try:
        cfg = fleet.ssh
        result = shell.run("true", cfg.command_timeout, 4096)
        out.startup_s = result.duration_s
        if result.rc is None:
            out.problem = (
                f"the login shell did not even run `true` within command_timeout "
                f"{cfg.command_timeout:g}s: its startup files (~/.bashrc, ~/.profile, "
                "$BASH_ENV) hang"
            )
            out.fix = "make them return at once for a non-interactive shell"
        elif result.duration_s > SLOW_STARTUP_S:
            out.problem = (
                f"the login shell takes {result.duration_s:.1f}s to run `true`: its startup "
                "files (~/.bashrc, ~/.profile, $BASH_ENV) run before every patrol's commands "
                f"and eat into command_timeout {cfg.command_timeout:g}s"
            )
            out.fix = (
                'make them return at once for a non-interactive shell ([ -z "$PS1" ] && '
                "return at the top of ~/.bashrc)"
            )
    except TransportError as e:
        out.problem = e.reason
        out.fix = host_fix(e.reason, fleet, host)
    finally:
        with contextlib.suppress(Exception):
            shell.close()
    return out


def _refused(text: str) -> bool:
    """A broker's ACL refusal, as the server words it (NOPERM, "no permissions")."""
    return "NOPERM" in text.upper() or "no permissions" in text.lower()


def row_fix(summary: str, fleet: FleetConfig, host: HostConfig | None) -> str:
    low = summary.lower()
    user = (host.user if host else None) or fleet.ssh.user or "the login user"
    if "permission denied" in low or "not readable" in low or "cannot read" in low:
        return f"give {user} read access on the host (e.g. group adm: usermod -aG adm {user})"
    if _refused(summary):
        return f"grant broker user {broker_user(fleet)} that command (docs/brokers.md: ACL)"
    if "no host" in low or "no targets" in low:
        return "configure it (docs/checks.md) or remove the check's table"
    return ""


def doctor(fleet: FleetConfig, deadline: float | None = None) -> tuple[list[str], int]:
    """(the lines to print, the exit code: 0 when a patrol would see everything, else 3)."""
    from fleetcheck.core import registry, runner
    from fleetcheck.core.model import Status
    from fleetcheck.core.safe_text import one_line
    from fleetcheck.transport.ssh import Connector

    limit = fleet.patrol.deadline if deadline is None else deadline
    t0 = time.monotonic()
    accept_new = fleet.ssh.accept_new
    # writes nothing: a host key not yet known is a finding, never added to known_hosts
    fleet = dataclasses.replace(fleet, ssh=dataclasses.replace(fleet.ssh, accept_new=False))
    found = Findings()
    broker_ok = check_broker(fleet, found)

    ssh_hosts = [h for h in fleet.hosts if h.ssh is not None and not h.is_local]
    logins: dict[str, HostLogin] = {}
    connector = Connector(fleet.ssh, fleet.patrol.concurrency, fleet.patrol.adaptive)
    try:
        _each(ssh_hosts, lambda h: logins.__setitem__(h.name, check_login(fleet, connector, h)),
              fleet.patrol.concurrency, t0 + limit)  # fmt: skip
    finally:
        connector.close()

    writing = writers(fleet)
    reading = {n: c for n, c in fleet.checks.items() if n not in writing}
    quiet = dataclasses.replace(fleet, checks=reading)
    checks = registry.select(list(reading))
    items = runner.plan(quiet, checks)
    left = max(1.0, limit - (time.monotonic() - t0))
    report = runner.run_patrol(quiet, items, deadline=left)

    by_host: dict[str | None, list[str]] = {}
    for r in report.results:
        if r.status is not Status.UNKNOWN:
            continue
        login = logins.get(r.host or "")
        if login is not None and login.problem and login.startup_s is None:
            continue  # could not log in: said once, on the host's line
        if not broker_ok and r.host is None:
            continue  # the broker's own line said why
        if _refused(r.summary):
            continue  # the ACL step named the command and its fix
        if login is not None and login.problem and "within command_timeout" in r.summary:
            continue  # the slow login shell's line is why
        by_host.setdefault(r.host, []).append(r.check)
        host = fleet.host(r.host) if r.host else None
        where = f"host {r.host}: {r.check}" if r.host else f"{r.check} (broker-wide)"
        found.problem(f"{where}: {r.summary}", row_fix(r.summary, fleet, host))

    for h in ssh_hosts:
        login = logins.get(h.name)
        if login is None:
            found.problem(
                f"host {h.name}: no answer within the patrol deadline", host_fix("", fleet, h)
            )
        elif login.problem and accept_new and "is not in" in login.problem:
            # a patrol would see it: accept_new adds the key at its first connection
            found.ok(
                f"host {h.name}: note: its host key is not known yet; the first patrol "
                "adds it (accept_new = true): compare its fingerprint out of band"
            )
        elif login.problem:
            found.problem(f"host {h.name}: {login.problem}", login.fix)
        elif h.name not in by_host:
            found.ok(
                f"host {h.name}: ok (login {login.login_s or 0:.2f}s, shell startup "
                f"{login.startup_s or 0:.2f}s, every check's commands ran)"
            )
    sees = (
        f"{found.problems} problem(s): a patrol would not" if found.problems else "a patrol would"
    )
    found.ok(f"doctor: {sees} see everything ({time.monotonic() - t0:.1f}s)")
    return [one_line(line) for line in found.lines], 3 if found.problems else 0


def _each(
    hosts: list[HostConfig], work: Callable[[HostConfig], None], concurrency: int, until: float
) -> None:
    """`work(host)` for every host, at most `concurrency` at once, waiting until `until`."""
    todo = list(hosts)
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                host = todo.pop(0)
            work(host)

    threads = [
        threading.Thread(target=worker, name=f"fleetcheck-doctor-{i}", daemon=True)
        for i in range(max(1, min(concurrency, len(hosts))))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, until - time.monotonic()))
