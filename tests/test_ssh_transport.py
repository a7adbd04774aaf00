"""The SSH transport against real OpenSSH sshd in lab namespaces: no mocked paramiko."""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

import pytest

from fleetcheck.config import HostConfig, SshConfig
from fleetcheck.core.errors import HOST_UNREACHABLE, TransportError
from fleetcheck.core.model import Status
from fleetcheck.transport.ssh import open_shell, resolve_target
from tests.hang import returns_within
from tests.lab import Lab, LabHost

pytestmark = pytest.mark.lab

CONNECT = 3.0


def ssh_cfg(lab: Lab, **kw: object) -> SshConfig:
    base: dict[str, object] = dict(
        user="root",
        known_hosts=str(lab.known_hosts),
        identity_file=str(lab.client_key),
        config_file="/dev/null",
        connect_timeout=CONNECT,
        command_timeout=5.0,
        use_agent=False,
    )
    base.update(kw)
    return SshConfig(**base)  # type: ignore[arg-type]


def host_cfg(h: LabHost, **kw: object) -> HostConfig:
    return HostConfig(name=h.name, ssh=h.addr, **kw)  # type: ignore[arg-type]


def fail(h: LabHost, cfg: SshConfig) -> TransportError:
    """Why open_shell fails. Its reason names the cause (refused, a timeout and which); the
    hang guard (20x CONNECT) catches a wait that never ends, it is not a timing."""
    with pytest.raises(TransportError) as info:
        returns_within(20 * CONNECT, lambda: open_shell(host_cfg(h), cfg), "open_shell")
    return info.value


def test_runs_a_command_with_rc_stdout_stderr_and_nodelay(lab: Lab) -> None:
    h = lab.add_host("a")
    shell = open_shell(host_cfg(h), ssh_cfg(lab))
    try:
        sock = shell.transport.sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        r = shell.run("echo out; echo err >&2; ip -4 -o addr show eth0; exit 7", 5, 4096)
        assert r.rc == 7
        assert r.stdout.startswith(b"out\n")
        assert h.addr.encode() in r.stdout  # it really ran inside the host's namespace
        assert r.stderr == b"err\n"
        assert not r.truncated
        # the same connection serves a second command
        assert shell.run("printf ok", 5, 4096).stdout == b"ok"
    finally:
        shell.close()


def test_login_shell_never_parses_the_script(lab: Lab) -> None:
    """The script goes to /bin/sh on stdin: quotes and newlines arrive intact."""
    h = lab.add_host("a")
    shell = open_shell(host_cfg(h), ssh_cfg(lab))
    try:
        script = "x='it'\"'\"'s'\nprintf '%s|' \"$x\" 'two\nlines'\n"
        assert shell.run(script, 5, 4096).stdout == b"it's|two\nlines|"
    finally:
        shell.close()


def test_command_deadline_is_hard(lab: Lab) -> None:
    h = lab.add_host("a")
    shell = open_shell(host_cfg(h), ssh_cfg(lab))
    try:
        # the hang guard (20 s) is below the command's 30 s: a deadline not kept is a hang
        r = returns_within(
            20, lambda: shell.run("echo started; sleep 30; echo never", 1.0, 4096), "shell.run"
        )
        assert r.rc is None
        assert r.stdout == b"started\n"
    finally:
        shell.close()


def test_output_is_read_with_a_byte_bound(lab: Lab) -> None:
    h = lab.add_host("a")
    shell = open_shell(host_cfg(h), ssh_cfg(lab))
    try:
        r = shell.run("head -c 3000000 /dev/zero; echo done >&2", 10, 10000)
        assert r.truncated
        assert len(r.stdout) == 10000
        assert r.rc == 0 and r.stderr == b"done\n"
    finally:
        shell.close()


def test_sshd_stopped_is_connection_refused(lab: Lab) -> None:
    h = lab.add_host("a")
    lab.stop_sshd(h)
    err = fail(h, ssh_cfg(lab))
    assert err.status is Status.UNKNOWN
    assert f"connection refused by {h.addr}:22" in err.reason


def test_sshd_frozen_times_out_waiting_for_the_banner(lab: Lab) -> None:
    h = lab.add_host("a")
    lab.freeze_sshd(h)
    err = fail(h, ssh_cfg(lab))
    assert err.status is Status.UNKNOWN
    assert err.reason.startswith(f"timed out after {CONNECT:g}s waiting for the SSH banner")


def test_host_down_is_unreachable_within_the_connect_timeout(lab: Lab) -> None:
    h = lab.add_host("a")
    lab.link_down(h)
    err = fail(h, ssh_cfg(lab))
    assert err.status is Status.CRIT and err.strength == "inference"
    assert err.evidence == {HOST_UNREACHABLE: err.evidence[HOST_UNREACHABLE]}
    assert (
        f"no route to {h.addr}:22" in err.reason
        or f"timed out after {CONNECT:g}s connecting to {h.addr}:22" in err.reason
    ), err.reason


def test_changed_host_key_is_crit_and_never_added(lab: Lab) -> None:
    h = lab.add_host("a")
    lab.change_host_key(h)
    before = lab.known_hosts.read_text()
    for accept_new in (False, True):
        err = fail(h, ssh_cfg(lab, accept_new=accept_new))
        assert err.status is Status.CRIT
        assert "host key changed" in err.reason
        assert "possible man-in-the-middle; not connecting" in err.reason
    assert lab.known_hosts.read_text() == before


def test_unknown_host_key_is_unknown_unless_accept_new(lab: Lab, tmp_path: Path) -> None:
    h = lab.add_host("a")
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    err = fail(h, ssh_cfg(lab, known_hosts=str(kh)))
    assert err.status is Status.UNKNOWN
    assert f"host key of {h.addr} ({h.addr}) is not in {kh}: not connecting" in err.reason
    assert kh.read_text() == ""
    # accept_new adds it once, then it is an ordinary known key
    shell = open_shell(host_cfg(h), ssh_cfg(lab, known_hosts=str(kh), accept_new=True))
    shell.close()
    assert kh.read_text().split() == [h.addr, *h.host_key_pub.split()]
    shell = open_shell(host_cfg(h), ssh_cfg(lab, known_hosts=str(kh)))
    shell.close()


def test_auth_refused_names_the_keys_tried(lab: Lab, tmp_path: Path) -> None:
    h = lab.add_host("a")
    other = tmp_path / "other_key"
    from tests.lab import run

    run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other))
    err = fail(h, ssh_cfg(lab, identity_file=str(other)))
    assert err.status is Status.UNKNOWN
    assert err.reason.startswith(f"authentication refused by {h.addr} for user root")
    assert str(other) in err.reason


def test_missing_identity_file_is_named(lab: Lab, tmp_path: Path) -> None:
    h = lab.add_host("a")
    err = fail(h, ssh_cfg(lab, identity_file=str(tmp_path / "nope")))
    assert f"{tmp_path / 'nope'}: no such file" in err.reason


def test_ssh_config_hostname_user_port_identityfile(lab: Lab, tmp_path: Path) -> None:
    h = lab.add_host("a", sshd_options="Port 2222\n")
    lab.known_hosts.write_text(lab.known_hosts.read_text() + f"[{h.addr}]:2222 {h.host_key_pub}\n")
    conf = tmp_path / "ssh_config"
    conf.write_text(
        f"Host box-a\n  HostName {h.addr}\n  User root\n  Port 2222\n"
        f"  IdentityFile {lab.client_key}\n"
    )
    cfg = ssh_cfg(lab, config_file=str(conf), user=None, identity_file=None)
    shell = open_shell(HostConfig(name="a", ssh="box-a"), cfg)
    try:
        r = shell.run('echo "$(id -un) $SSH_CONNECTION"', 5, 4096)
        user, _, _, server_ip, server_port = r.stdout.decode().split()
        assert (user, server_ip, server_port) == ("root", h.addr, "2222")
    finally:
        shell.close()


def test_proxyjump_goes_through_the_jump_host(lab: Lab, tmp_path: Path) -> None:
    jump, inner = lab.add_host("jump"), lab.add_host("inner")
    conf = tmp_path / "ssh_config"
    conf.write_text(f"Host inner\n  HostName {inner.addr}\n  ProxyJump {jump.addr}\n")
    shell = open_shell(HostConfig(name="inner", ssh="inner"), ssh_cfg(lab, config_file=str(conf)))
    try:
        client_ip = shell.run("echo $SSH_CONNECTION", 5, 4096).stdout.split()[0].decode()
        assert client_ip == jump.addr  # inner saw the connection come from the jump host
    finally:
        shell.close()


def test_proxyjump_with_a_dead_jump_host_names_it(lab: Lab, tmp_path: Path) -> None:
    jump, inner = lab.add_host("jump"), lab.add_host("inner")
    lab.stop_sshd(jump)
    conf = tmp_path / "ssh_config"
    conf.write_text(f"Host inner\n  HostName {inner.addr}\n  ProxyJump {jump.addr}\n")
    with pytest.raises(TransportError) as info:
        open_shell(HostConfig(name="inner", ssh="inner"), ssh_cfg(lab, config_file=str(conf)))
    assert f"connection refused by {jump.addr}:22" in info.value.reason


def test_proxycommand(lab: Lab, tmp_path: Path) -> None:
    jump, inner = lab.add_host("jump"), lab.add_host("inner")
    conf = tmp_path / "ssh_config"
    conf.write_text(
        f"Host inner\n  HostName {inner.addr}\n"
        f"  ProxyCommand ssh -q -i {lab.client_key} -o UserKnownHostsFile={lab.known_hosts} "
        f"-o StrictHostKeyChecking=yes -o BatchMode=yes -F /dev/null -W %h:%p root@{jump.addr}\n"
    )
    shell = open_shell(HostConfig(name="inner", ssh="inner"), ssh_cfg(lab, config_file=str(conf)))
    try:
        client_ip = shell.run("echo $SSH_CONNECTION", 5, 4096).stdout.split()[0].decode()
        assert client_ip == jump.addr
    finally:
        shell.close()


def test_resolve_target_precedence(tmp_path: Path) -> None:
    """OpenSSH's order: what hosts.toml says for the host (user@host:port, `user`, `port`)
    acts like ssh's command line and wins; then ssh_config; then the [ssh] defaults."""
    from fleetcheck.transport.ssh import load_ssh_config

    conf_file = tmp_path / "ssh_config"
    conf_file.write_text(
        "Host web\n  HostName 198.18.0.9\n  User deploy\n  Port 2200\n  IdentityFile ~/k1\n"
    )
    conf = load_ssh_config(str(conf_file))
    cfg = SshConfig(user="root", port=2022, identity_file="/k2", config_file=str(conf_file))
    t = resolve_target("web", cfg, conf)
    assert (t.hostname, t.user, t.port) == ("198.18.0.9", "deploy", 2200)  # ssh_config > [ssh]
    assert t.identity_files[-1] == "/k2" and t.identity_files[0].endswith("/k1")
    t = resolve_target("web", cfg, conf, user="ops", port=2023)
    assert (t.user, t.port) == ("ops", 2023)  # the host's own keys > ssh_config
    t = resolve_target("admin@web:2201", cfg, conf)
    assert (t.hostname, t.user, t.port) == ("198.18.0.9", "admin", 2201)
    assert t.known_hosts_name == "[198.18.0.9]:2201"
    # a HostKeyAlias is looked up as OpenSSH does: lower-cased, never with a port
    assert replace(t, host_key_alias="Web-Key").known_hosts_name == "web-key"
    t = resolve_target("other", cfg, conf)
    assert (t.hostname, t.user, t.port) == ("other", "root", 2022)  # [ssh] when nothing else


def test_cached_known_hosts_sees_a_changed_key_and_a_re_trust(lab: Lab) -> None:
    """known_hosts is parsed once per patrol, but never served stale: a key that changes after
    a good connect is CRIT, and the operator's fix of known_hosts is seen at once."""
    h = lab.add_host("a")
    open_shell(host_cfg(h), ssh_cfg(lab)).close()  # the parsed file is cached now
    lab.change_host_key(h)
    err = fail(h, ssh_cfg(lab))
    assert err.status is Status.CRIT
    assert "host key changed" in err.reason
    lab.trust(h)  # the operator verifies the new key and writes it
    open_shell(host_cfg(h), ssh_cfg(lab)).close()


FRESH = """
import sys, threading, json
from fleetcheck.config import HostConfig, SshConfig
from fleetcheck.transport.ssh import open_shell
args = json.loads(sys.argv[1])
cfg = SshConfig(user="root", known_hosts=args["known_hosts"], identity_file=args["key"],
                config_file=args["config"], connect_timeout=5.0, command_timeout=5.0,
                use_agent=False)
out = {}
def one(name, ssh):
    try:
        shell = open_shell(HostConfig(name=name, ssh=ssh), cfg)
        try:
            out[name] = shell.run("printf ok", 5, 100).stdout.decode()
        finally:
            shell.close()
    except Exception as e:
        out[name] = f"{type(e).__name__}: {e}"
lanes = [threading.Thread(target=one, args=item) for item in args["hosts"].items()]
for t in lanes: t.start()
for t in lanes: t.join()
print(json.dumps({"results": out, "invoke": "invoke" in sys.modules}))
"""


def fresh_process(lab: Lab, hosts: dict[str, str], config: str = "/dev/null") -> dict[str, object]:
    """Connect from a new interpreter (paramiko not yet imported), all hosts at once."""
    import json
    import subprocess
    import sys

    args = dict(known_hosts=str(lab.known_hosts), key=str(lab.client_key), config=config)
    proc = subprocess.run(
        [sys.executable, "-c", FRESH, json.dumps({**args, "hosts": hosts})],
        capture_output=True,
        timeout=60,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_first_connects_race_the_paramiko_import_without_invoke(lab: Lab) -> None:
    """Every lane of a fresh patrol connects at once while paramiko is still being imported
    (once); the import skips `invoke`, which only ssh config's `Match exec` needs."""
    hosts = {f"h{i}": lab.add_host(f"h{i}").addr for i in range(4)}
    out = fresh_process(lab, hosts)
    assert out["results"] == dict.fromkeys(hosts, "ok")
    assert out["invoke"] is False


def test_match_exec_in_ssh_config_still_works(lab: Lab, tmp_path: Path) -> None:
    h = lab.add_host("a")
    conf = tmp_path / "ssh_config"
    conf.write_text(f"Match host box exec true\n  HostName {h.addr}\n")
    out = fresh_process(lab, {"a": "box"}, config=str(conf))
    assert out["results"] == {"a": "ok"}
    assert out["invoke"] is False  # our resolver runs `Match exec` itself


def test_known_hosts_index_answers_like_paramiko(tmp_path: Path) -> None:
    """The per-patrol known_hosts index finds what paramiko.HostKeys.lookup finds, for
    plain, hashed, multi-name, non-default-port and duplicate-type lines; unlike paramiko, a
    bad line (bad base64, unknown marker) is skipped as OpenSSH skips it, never the file."""
    import paramiko
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    from fleetcheck.transport.known_hosts import KnownHostsFile, Lookup

    def pub() -> str:
        key = ed25519.Ed25519PrivateKey.generate().public_key()
        ssh = serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        return key.public_bytes(*ssh).decode()

    ecdsa = paramiko.ECDSAKey.generate()
    ecdsa_pub = f"{ecdsa.get_name()} {ecdsa.get_base64()}"
    a1, a2, b, c, d = pub(), pub(), pub(), pub(), pub()
    hashed = paramiko.HostKeys.hash_host("10.0.0.9")
    kh = tmp_path / "known_hosts"
    good = (
        "# a comment\n\n"
        f"10.0.0.1 {a1}\n"
        f"10.0.0.1 {a2}\n"  # a second key of the same type: the first one counts
        f"10.0.0.1 {ecdsa_pub}\n"
        f"web1,10.0.0.2 {b}\n"
        f"[10.0.0.3]:2222 {c}\n"
        f"{hashed} {d}\n"
        "10.0.0.5 ssh-unknown AAAA\n"
        "10.0.0.6 onlytwo\n"
    )
    kh.write_text(good)
    theirs = paramiko.HostKeys(str(kh))
    kh.write_text(good + "10.0.0.4 ssh-ed25519 !!!not-base64\n@weird 10.0.0.1 x y\n")
    index = KnownHostsFile(str(kh))
    names = ["10.0.0.1", "web1", "10.0.0.2", "[10.0.0.3]:2222", "10.0.0.3", "10.0.0.9"]
    for name in [*names, "10.0.0.4", "10.0.0.5", "10.0.0.6", "nope"]:
        entry = theirs.lookup(name)
        expected = {k: entry[k].asbytes() for k in entry} if entry else {}
        found = Lookup()
        index.lookup([name], found)
        first: dict[str, bytes] = {}
        for k in found.keys:
            first.setdefault(k.keytype, k.blob)
        assert first == expected, name
    # "ssh-unknown AAAA" (a blob that does not name its type), two fields, bad base64,
    # unknown marker
    assert index.skipped == 4


def test_prefers_aes_gcm_and_still_reaches_a_server_without_it(lab: Lab) -> None:
    """AES-GCM (cheaper per byte in paramiko) is asked for first; a server that allows only
    AES-CTR with a non-ETM MAC is still reached with what it allows."""
    modern = lab.add_host("modern")
    old = lab.add_host("old", sshd_options="Ciphers aes128-ctr\nMACs hmac-sha2-256\n")
    for h, cipher, mac in (
        (modern, "aes128-gcm@openssh.com", None),
        (old, "aes128-ctr", "hmac-sha2-256"),
    ):
        shell = open_shell(host_cfg(h), ssh_cfg(lab))
        try:
            t = shell.transport
            assert (t.local_cipher, t.remote_cipher) == (cipher, cipher)
            if mac is not None:
                assert (t.local_mac, t.remote_mac) == (mac, mac)
            assert shell.run("printf ok", 5, 100).stdout == b"ok"
        finally:
            shell.close()


@pytest.mark.parametrize(
    ("offered", "preferred", "expected"),
    [
        (("a", "b", "c"), ("c",), ("c", "a", "b")),
        (("a", "b", "c"), ("c", "b"), ("c", "b", "a")),
        (("a", "b"), ("x", "b"), ("b", "a")),  # not offered: never added
        (("a", "b"), (), ("a", "b")),
        ((), ("a",), ()),
    ],
)
def test_first_moves_preferred_to_the_front(
    offered: tuple[str, ...], preferred: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    from fleetcheck.transport.ssh.handshake import _first

    assert _first(offered, preferred) == expected


def test_login_refused_by_the_account_shell_gives_its_reason(lab: Lab) -> None:
    """An account whose shell refuses (nologin; here a ForceCommand that prints and exits
    without reading stdin) closes the channel while we still send the script: the row gives
    what the server said, never "cannot run the command: Socket is closed"."""
    h = lab.add_host(
        "nologin",
        sshd_options='ForceCommand echo "This account is currently not available."; exit 1\n',
    )
    script = "true\n" + "# padding to keep us sending after the remote side is gone\n" * 8000
    for _ in range(5):
        shell = open_shell(host_cfg(h), ssh_cfg(lab))
        try:
            try:
                r = shell.run(script, 5, 4096)
            except TransportError as e:
                assert "Socket is closed" not in e.reason
                assert "This account is currently not available." in e.reason, e.reason
            else:
                assert r.rc == 1
                assert r.stdout == b"This account is currently not available.\n"
        finally:
            shell.close()


def test_a_hung_agent_costs_the_connect_budget_not_a_hang(lab: Lab, tmp_path: Path) -> None:
    """An ssh agent that accepts and never answers: agent I/O is inside the connect budget,
    so the host is UNKNOWN when the budget ends, naming the agent, and the patrol goes on."""
    import os
    import threading

    h = lab.add_host("a")
    path = str(tmp_path / "agent.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])  # read nothing, answer nothing
            except TimeoutError:
                continue
            except OSError:
                return

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    old = os.environ.get("SSH_AUTH_SOCK")
    os.environ["SSH_AUTH_SOCK"] = path
    try:
        cfg = ssh_cfg(lab, use_agent=True, connect_timeout=2.0)
        err = fail(h, cfg)
    finally:
        if old is None:
            del os.environ["SSH_AUTH_SOCK"]
        else:
            os.environ["SSH_AUTH_SOCK"] = old
        stop.set()
        server.close()
        for c in held:
            c.close()
    assert err.status is Status.UNKNOWN
    assert err.reason == f"timed out after 2s asking the ssh agent for keys for {h.addr}"


def test_keys_from_a_real_ssh_agent(lab: Lab, tmp_path: Path) -> None:
    """No identity file: the key comes from a real ssh-agent over our own bounded socket."""
    import os
    import subprocess

    from tests.lab import wait_for

    h = lab.add_host("a")
    path = str(tmp_path / "agent.sock")
    agent = subprocess.Popen(
        ["ssh-agent", "-D", "-a", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: os.path.exists(path), 10, "ssh-agent's socket")
        env = {**os.environ, "SSH_AUTH_SOCK": path}
        subprocess.run(["ssh-add", "-q", str(lab.client_key)], env=env, check=True, timeout=30)
        old = os.environ.get("SSH_AUTH_SOCK")
        os.environ["SSH_AUTH_SOCK"] = path
        try:
            shell = open_shell(host_cfg(h), ssh_cfg(lab, identity_file=None, use_agent=True))
        finally:
            if old is None:
                del os.environ["SSH_AUTH_SOCK"]
            else:
                os.environ["SSH_AUTH_SOCK"] = old
        try:
            assert shell.run("printf ok", 5, 100).stdout == b"ok"
        finally:
            shell.close()
    finally:
        agent.kill()
        agent.wait()
