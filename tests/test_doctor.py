"""Issue 28 item 2: `fleetcheck doctor` on the real lab. Healthy: exit 0. With a wrong
password, a host whose key is not in known_hosts, a host whose login shell's startup file
sleeps 5 s, an unreadable log and a broker user without CLIENT LIST: one line each naming it
and its fix, exit non-zero, and nothing written on any host or the broker (MONITOR sees no
write command; every key byte-identical; known_hosts unchanged)."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import pytest

from fleetcheck import doctor
from fleetcheck.config import load
from fleetcheck.core import registry
from tests.cli import fleetcheck
from tests.lab import Lab, LabHost

pytestmark = pytest.mark.lab

READS = {
    "ping", "info", "client", "type", "llen", "lindex", "hscan", "time", "lpos", "lrange",
    "multi", "discard", "hello", "auth", "select", "echo", "acl",
    # doctor proves EXEC with an empty MULTI ... EXEC; a command EXEC ran shows as itself
    "exec",
}  # fmt: skip

CHECKS = (
    "[checks.broker]\n[checks.clients]\n[checks.routes]\n[checks.logs]\n"
    '[checks.queue_depth]\nkeys = ["arena:queue"]\ncap = 100\nsamples = 1\n'
    '[checks.live_hash]\n[checks.rater_probe]\ninbox = "arena:rater:inbox"\ntimeout = "2s"\n'
)


class Monitor:
    """MONITOR on the lab's broker in a thread: every command anyone sends, by name."""

    def __init__(self, lab: Lab) -> None:
        self.client = lab.client(socket_timeout=None)
        self.seen: list[str] = []
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self) -> None:
        with self.client.monitor() as m:
            self.ready.set()
            for event in m.listen():
                command = event["command"]
                if command == "ECHO doctor-test-stop":
                    return
                self.seen.append(command)

    def stop(self, lab: Lab) -> list[str]:
        r = lab.client()
        r.execute_command("ECHO", "doctor-test-stop")
        r.close()
        self.thread.join(10)
        return self.seen


def dump_all(lab: Lab) -> dict[bytes, Any]:
    r = lab.client()
    out = {key: r.dump(key) for key in r.scan_iter(count=1000)}
    r.close()
    return out


def log_on(h: LabHost) -> str:
    path = h.log_path("worker.log")
    path.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ INFO tick\n", time.gmtime()))
    return f'tz = "UTC"\nlogs = [{{ path = "{path}", max_age = "10m" }}]'


def seed(lab: Lab) -> None:
    r = lab.client()
    r.rpush("arena:queue", '{"enqueued_at": 1}')
    r.hset("arena:live", "m1", json.dumps({"started_at": int(time.time()), "host": "ok1"}))
    r.close()


def test_healthy_fleet_is_exit_0(lab: Lab) -> None:
    ok1 = lab.add_host("ok1")
    lab.start_workers(ok1, 1)
    seed(lab)
    conf = lab.config(checks=CHECKS, host_extra={"ok1": log_on(ok1)})
    proc = fleetcheck("doctor", "-c", str(conf))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith(f"broker {lab.gateway}:") and ": ok (user default" in lines[0]
    assert re.fullmatch(
        r"host ok1: ok \(login \d+\.\d\ds, shell startup \d+\.\d\ds, every check's commands ran\)",
        lines[1],
    ), lines
    assert lines[-1].startswith("doctor: a patrol would see everything")
    # config check --connect is the same code
    proc = fleetcheck("config", "check", "-c", str(conf), "--connect")
    assert proc.returncode == 0 and "doctor: a patrol would see everything" in proc.stdout


def test_every_fault_is_one_line_with_its_fix_and_nothing_is_written(lab: Lab) -> None:
    ok1 = lab.add_host("ok1")
    nokey = lab.add_host("nokey")
    startup = lab.dir / "slow-startup.sh"
    startup.write_text("sleep 5\n")
    slow = lab.add_host("slow", sshd_options=f"SetEnv BASH_ENV={startup}\n")
    denied = lab.add_unprivileged_host("denied")
    lab.start_workers(ok1, 1)
    seed(lab)
    # nokey's key is not in known_hosts
    known = lab.known_hosts
    known.write_text(
        "".join(line + "\n" for line in known.read_text().splitlines() if nokey.addr not in line)
    )
    # a log only root may read, on a host whose sessions run as nobody
    unreadable = log_on(denied)
    denied.log_path("worker.log").chmod(0o600)
    for p in (lab.dir, denied.dir):
        p.chmod(0o755)
    # a broker user that may do everything but CLIENT LIST
    admin = lab.client()
    admin.execute_command("ACL", "SETUSER", "fc", "on", ">fc-pw", "~*", "&*", "+@all",
                          "-client|list")  # fmt: skip
    admin.close()
    extra = {"ok1": log_on(ok1), "nokey": log_on(nokey), "slow": log_on(slow)}
    extra["denied"] = unreadable
    conf = lab.config(checks=CHECKS, host_extra=extra)
    text = conf.read_text().replace(
        'connect_timeout = "2s"\n',
        'connect_timeout = "2s"\nusername = "fc"\npassword_env = "FC_DOCTOR_PW"\n',
        1,
    )
    text = text.replace('command_timeout = "5s"', 'command_timeout = "10s"')
    conf.write_text(text)
    keys_before, known_before = dump_all(lab), known.read_bytes()
    monitor = Monitor(lab)
    # fleetcheck()'s timeout (120 s) is the hang guard: the doctor's work here is ~10 s
    proc = fleetcheck("doctor", "-c", str(conf), env={"FC_DOCTOR_PW": "fc-pw"})
    seen = monitor.stop(lab)
    out = proc.stdout
    assert proc.returncode == 3, out + proc.stderr
    assert "Traceback" not in out + proc.stderr and proc.stderr == "", proc.stderr
    lines = out.strip().splitlines()

    def one(pattern: str) -> str:
        hits = [line for line in lines if re.search(pattern, line)]
        assert len(hits) == 1, (pattern, lines)
        assert ": fix: " in hits[0], hits[0]
        return hits[0]

    acl = one(r"^broker .*user fc may not run CLIENT LIST \(clients needs it\)")
    assert acl.endswith("fix: ACL SETUSER fc +client|list (on the broker, as an admin)")
    one(r"^host nokey: host key of .* is not in .*known_hosts.*fix: verify the key")
    startup_line = one(r"^host slow: the login shell takes [5-9]\.\ds to run `true`")
    assert '[ -z "$PS1" ] && return' in startup_line
    one(r"^host denied: logs: .*(ermission denied|not readable|cannot read).*fix: give ")
    assert any(re.match(r"host ok1: ok \(", line) for line in lines), "\n".join(lines)
    assert lines[-1].startswith("doctor: 4 problem(s)"), lines
    # nothing written anywhere
    names = {c.split()[0].strip('"').lower() for c in seen if c.strip()}
    assert names <= READS, names - READS
    assert {"multi", "discard"} <= names  # MONITOR did watch doctor's ACL step
    assert dump_all(lab) == keys_before
    assert known.read_bytes() == known_before

    # a wrong password: one line naming the variable to fix, nothing else of the broker
    proc = fleetcheck("doctor", "-c", str(conf), env={"FC_DOCTOR_PW": "wrong"})
    assert proc.returncode == 3
    broker_lines = [line for line in proc.stdout.splitlines() if line.startswith("broker ")]
    assert len(broker_lines) == 1, proc.stdout
    assert "fix: set $FC_DOCTOR_PW" in broker_lines[0] and "wrong" not in proc.stdout


def test_needs_cover_what_a_patrol_sends(lab: Lab) -> None:
    """The commands doctor asks the ACL about are every command a real patrol of every
    broker check sends (MONITOR), so a check that starts sending a new one fails here."""
    ok1 = lab.add_host("ok1")
    seed(lab)
    lab.start_rater()
    conf = lab.config(checks=CHECKS, host_extra={"ok1": log_on(ok1)})
    monitor = Monitor(lab)
    proc = fleetcheck("run", "-c", str(conf), "--no-state", "-f", "json")
    seen = monitor.stop(lab)
    assert proc.returncode in (0, 1, 2), proc.stderr
    fleet = load(conf, registry.config_type, registry.host_config_types)
    asked = {n.args[0].lower() for n in doctor.broker_needs(fleet)}
    ours = {c.split()[0].strip('"').lower() for c in seen if c.strip()}
    # the rater's own BLPOP/RPUSH and the connection's set-up are not the checks' commands
    ours -= {"blpop", "brpop", "hello", "client", "select", "auth"}
    # the probe's push goes in one MULTI ... EXEC: doctor proves commands by queuing them in
    # a MULTI of its own, where MULTI and EXEC cannot be queued (EXEC would run them); the
    # documented ACL user grants both (docs/brokers.md)
    ours -= {"multi", "exec"}
    assert ours <= asked, ours - asked


def test_documented_acl_user_proves_the_probes_writes(lab: Lab) -> None:
    """The least-privilege user of docs/brokers.md may MULTI and DISCARD (never EXEC): doctor
    proves its RPUSH on the inbox is allowed, and names the one it is not allowed."""
    from tests.test_broker_server import readme_acl

    rules = readme_acl("<!-- acl:patrol -->")
    admin = lab.client()
    admin.execute_command("ACL", "SETUSER", "fleetcheck", "reset", *rules, ">Pw-doc")
    admin.close()
    seed(lab)
    conf = lab.config(checks=CHECKS, hosts=[])
    text = conf.read_text().replace(
        f'url = "{lab.broker_url}"',
        f'url = "{lab.broker_url}"\nusername = "fleetcheck"\npassword_env = "FC_DOC_PW"',
    )
    conf.write_text(text.replace("[checks.logs]\n", "").replace("[checks.routes]\n", ""))
    proc = fleetcheck("doctor", "-c", str(conf), env={"FC_DOC_PW": "Pw-doc"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "note:" not in proc.stdout and ": ok (user fleetcheck" in proc.stdout
    # another inbox than the one the ACL grants: its push is named, and nothing was written
    keys_before = dump_all(lab)
    conf.write_text(conf.read_text().replace('inbox = "arena:rater:inbox"', 'inbox = "other"'))
    proc = fleetcheck("doctor", "-c", str(conf), env={"FC_DOC_PW": "Pw-doc"})
    assert proc.returncode == 3
    assert "user fleetcheck may not run RPUSH on other (rater_probe needs it): fix: ACL SETUSER " \
        "fleetcheck +rpush ~other" in proc.stdout, proc.stdout  # fmt: skip
    assert dump_all(lab) == keys_before
