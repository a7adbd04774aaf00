"""The harness's lab: a few sshds built once for all cases, and the two sides of each case
(the real `ssh` client, fleetcheck's transport) run against them.

Hosts: `multi` serves ed25519, ECDSA and RSA host keys on ports 22 and 2222; `jump` is a
plain jump host; each `c_*` host serves its ed25519 key with one host certificate (valid,
no principals, expired, not yet valid, another principal, a critical option, a user
certificate, an RSA one signed by its CA with SHA-1 `ssh-rsa`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fleetcheck.config import HostConfig, SshConfig
from fleetcheck.core.errors import TransportError
from fleetcheck.transport.ssh import open_shell
from tests.lab import Lab, LabHost

if TYPE_CHECKING:
    from tests.ssh_diff_hostkeys.case import Case

CONNECT = 5.0
Outcome = tuple[tuple[bool, str], tuple[bool, str]]  # (ssh: ok, stderr), (ours: ok, reason)


def keygen(path: Path, kind: str) -> str:
    """A new key of `kind` at `path`; returns 'type base64' of its public half."""
    path.unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True, timeout=60
    )
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])


def hashed(name: str, salt: bytes = b"fleetcheck-harness-s") -> str:
    """`name` as ssh-keygen -H writes it (|1|salt|HMAC-SHA1)."""
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


# each certificate host: ssh-keygen -s arguments (the CA is `ca` unless the tuple says rsa)
CERT_HOSTS: dict[str, tuple[str, ...]] = {
    "c_ok": ("-h", "-n", "{addr},certalias", "-V", "-5m:+1h"),
    "c_noprinc": ("-h", "-V", "-5m:+1h"),
    "c_expired": ("-h", "-n", "{addr}", "-V", "20000101:20000102"),
    "c_future": ("-h", "-n", "{addr}", "-V", "+520w:+1040w"),
    "c_wrongp": ("-h", "-n", "some-other-host", "-V", "-5m:+1h"),
    "c_crit": ("-h", "-n", "{addr}", "-O", "force-command=/bin/false", "-V", "-5m:+1h"),
    "c_user": ("-n", "{addr}", "-V", "-5m:+1h"),
    "c_sha1": ("-h", "-n", "{addr}", "-V", "-5m:+1h", "-t", "ssh-rsa"),
}


@dataclass
class Keys:
    """Everything a case's known_hosts template may name."""

    addr: str = ""  # multi
    ed: str = ""
    ec: str = ""
    rsa: str = ""
    ed2: str = ""  # keys of each type that no server has
    ec2: str = ""
    rsa2: str = ""
    ca: str = ""  # the CA of every certificate host but c_sha1
    ca_rsa: str = ""  # c_sha1's CA
    ca_other: str = ""  # a CA that signed nothing
    jaddr: str = ""
    jed: str = ""
    cert: dict[str, tuple[str, str]] = field(default_factory=dict)  # name: (addr, plain key)

    def c(self, name: str) -> str:
        return self.cert[name][0]

    @property
    def net(self) -> str:
        """The first two octets of the lab's addresses (its subnet may be anywhere in
        198.18.0.0/15): `198.18` or `198.19`."""
        return ".".join(self.addr.split(".")[:2])

    @property
    def star(self) -> str:
        """A pattern for every lab address: `198.18.*` (or `198.19.*`)."""
        return f"{self.net}.*"

    def ck(self, name: str) -> str:
        return self.cert[name][1]

    @staticmethod
    def hash(name: str) -> str:
        return hashed(name)

    @staticmethod
    def trailing(key: str) -> str:
        """`key` with four bytes after its fields (sshkey_fromb refuses trailing data)."""
        kind, b64 = key.split()
        return f"{kind} {base64.b64encode(base64.b64decode(b64) + bytes(4)).decode()}"


class Fleet:
    """The lab with the harness's sshds, and the runners."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.hosts: dict[str, LabHost] = {}
        self.k = Keys()
        work = lab.dir / "diff"
        work.mkdir()
        self.work = work
        k = self.k
        k.ed2 = keygen(work / "ed2", "ed25519")
        k.ec2 = keygen(work / "ec2", "ecdsa")
        k.rsa2 = keygen(work / "rsa2", "rsa")
        k.ca = keygen(work / "ca", "ed25519")
        k.ca_rsa = keygen(work / "ca_rsa", "rsa")
        k.ca_other = keygen(work / "ca_other", "ed25519")
        m = lab.add_host("multi", sshd=False)
        opts = "Port 2222\n"
        k.ec = keygen(m.dir / "hk_ecdsa", "ecdsa")
        k.rsa = keygen(m.dir / "hk_rsa", "rsa")
        opts += f"HostKey {m.dir}/hk_ecdsa\nHostKey {m.dir}/hk_rsa\n"
        lab.start_sshd(m, options=opts)
        k.addr, k.ed = m.addr, m.host_key_pub
        self.hosts["multi"] = m
        j = lab.add_host("jump")
        k.jaddr, k.jed = j.addr, j.host_key_pub
        self.hosts["jump"] = j
        for name, args in CERT_HOSTS.items():
            h = lab.add_host(name.replace("_", ""), sshd=False)
            key = h.dir / "ssh_host_ed25519_key"
            h.host_key_pub = keygen(key, "ed25519")
            opts = ""
            ca = work / "ca"
            if name == "c_sha1":  # an RSA host key certified by the RSA CA with SHA-1
                key = h.dir / "hk_rsa"
                keygen(key, "rsa")
                ca = work / "ca_rsa"
                opts = f"HostKey {key}\n"
            sign = [a.format(addr=h.addr) for a in args]
            subprocess.run(
                ["ssh-keygen", "-q", "-s", str(ca), "-I", f"lab-{name}", *sign, f"{key}.pub"],
                check=True,
                timeout=60,
            )
            opts += f"HostCertificate {key}-cert.pub\n"
            lab.start_sshd(h, options=opts)
            plain = " ".join(Path(f"{key}.pub").read_text().split()[:2])
            k.cert[name] = (h.addr, plain)
            self.hosts[name] = h

    # ------------------------------------------------------------ the two sides
    def openssh(
        self,
        case_id: str,
        target: str,
        known_hosts: str,
        port: int,
        alias: str | None,
        jump: bool,
        strict: str,
        extra: tuple[str, ...] = (),
    ) -> tuple[bool, str]:
        """Does the real client connect (and run `true`)? And its stderr. (`extra`: more
        arguments, such as -vvv when debugging a case.)"""
        kh = self.work / f"{case_id}.ssh_kh"
        kh.write_bytes(known_hosts.encode())
        h = self.hosts[target]
        opts = {
            "User": "root",
            "IdentityFile": str(self.lab.client_key),
            "IdentitiesOnly": "yes",
            "IdentityAgent": "none",
            "BatchMode": "yes",
            "UserKnownHostsFile": str(kh),
            "GlobalKnownHostsFile": "/dev/null",
            "StrictHostKeyChecking": strict,
            "UpdateHostKeys": "no",
            "ConnectTimeout": str(int(CONNECT)),
            # the post-quantum default costs CPU and decides nothing about host keys
            "KexAlgorithms": "curve25519-sha256",
        }
        argv = ["ssh"]
        if jump:  # the ProxyJump child reads only the config file: everything goes there
            cfg = self.work / f"{case_id}.ssh_config"
            body = f"Host {h.addr}\n  ProxyJump root@{self.k.jaddr}\n"
            if alias:
                body += f"  HostKeyAlias {alias}\n"
            body += "Host *\n" + "".join(f"  {k} {v}\n" for k, v in opts.items())
            cfg.write_text(body)
            argv += ["-F", str(cfg)]
        else:
            argv += ["-F", "/dev/null"]
            for key, value in opts.items():
                argv += ["-o", f"{key}={value}"]
            if alias:
                argv += ["-o", f"HostKeyAlias={alias}"]
        argv += [*extra, "-p", str(port), h.addr, "true"]
        proc = subprocess.run(argv, capture_output=True, timeout=30, env=_env())
        return proc.returncode == 0, proc.stderr.decode("utf-8", "replace")

    def ours(
        self,
        case_id: str,
        target: str,
        known_hosts: str,
        port: int,
        alias: str | None,
        jump: bool,
        strict: str,
    ) -> tuple[bool, str]:
        """Does fleetcheck's transport connect (and run a command)? Else its one-line reason
        as 'STATUS: reason'."""
        kh = self.work / f"{case_id}.our_kh"
        kh.write_bytes(known_hosts.encode())
        h = self.hosts[target]
        cfg_file = self.work / f"{case_id}.our_config"
        body = f"Host {h.addr}\n"
        if jump:
            body += f"  ProxyJump root@{self.k.jaddr}\n"
        if alias:
            body += f"  HostKeyAlias {alias}\n"
        body += f"Host *\n  StrictHostKeyChecking {strict}\n"
        cfg_file.write_text(body)
        cfg = SshConfig(
            user="root",
            known_hosts=str(kh),
            identity_file=str(self.lab.client_key),
            config_file=str(cfg_file),
            connect_timeout=CONNECT,
            command_timeout=5.0,
            use_agent=False,
        )
        host = HostConfig(name=target.replace("_", "-"), ssh=h.addr, port=port)
        try:
            shell = open_shell(host, cfg)
        except TransportError as e:
            return False, f"{e.status.label}: {e.reason}"
        try:
            ok = shell.run("printf ok", 5, 100).stdout == b"ok"
        finally:
            shell.close()
        return ok, "" if ok else "command failed"


def run_case(fleet: Fleet, case: Case) -> Outcome:
    """Both sides of one case."""
    kh = case.known_hosts(fleet.k)
    args = (case.id, case.target, kh, case.port, case.alias, case.jump, case.strict)
    return fleet.openssh(*args), fleet.ours(*args)


def _env() -> dict[str, str]:
    """The client's environment without an agent (ssh must use the lab key only)."""
    env = dict(os.environ)
    env.pop("SSH_AUTH_SOCK", None)
    return env


def category(text: str, ours: bool) -> str:
    """What a refusal says in one word: revoked, changed or unknown (also certificates)."""
    if ours:
        if "REVOKED" in text or "@revoked" in text:
            return "revoked"
        if "host key changed" in text:
            return "changed"
        return "unknown"
    if "REVOKED HOST KEY" in text or "was revoked" in text:
        return "revoked"
    if "HOST IDENTIFICATION HAS CHANGED" in text:
        return "changed"
    return "unknown"
