"""The lab's hosts: a network namespace each, joined to the bridge by a veth pair, its own
sshd and host key, and a second interface when asked (the faults only tests plant are in
tests/lab.py)."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

from fleetcheck.lab.base import LabHost
from fleetcheck.lab.broker import BrokerLab
from fleetcheck.lab.system import SSHD, port_open, run, wait_for


class HostsLab(BrokerLab):
    """Hosts and their sshd."""

    # ------------------------------------------------------------ hosts
    def _make_client_key(self) -> None:
        self.client_key = self.dir / "id_ed25519"
        run(
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "fleetcheck-lab",
            "-f",
            str(self.client_key),
        )
        self.authorized_keys = self.dir / "authorized_keys"
        shutil.copy(str(self.client_key) + ".pub", self.authorized_keys)
        self.known_hosts = self.dir / "known_hosts"
        self.known_hosts.write_text("")
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory

    def _alloc_ip(self) -> str:
        addr = str(self.subnet.network_address + self._next_ip)
        self._next_ip += 1
        if self._next_ip > self.subnet.num_addresses - 2:
            raise RuntimeError("lab subnet full")
        return addr

    def _veth(self, host: LabHost, inner: str) -> str:
        outer = f"fv{self.id}{self.namespaces.index(host.ns):02d}{len(host.veths)}"
        run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", host.ns)
        run("ip", "link", "set", outer, "master", self.bridge, "up")
        host.veths.append(outer)
        return outer

    def add_host(self, name: str, *, sshd: bool = True, sshd_options: str = "") -> LabHost:
        if not self.netns:  # a loopback lab: the host is this machine, seen from 127.0.0.x
            hdir = self.dir / name
            hdir.mkdir()
            host = LabHost(name=name, ns="", addr=self._alloc_ip(), dir=hdir)
            self.hosts[name] = host
            return host
        ns = f"fc{self.id}-{name}"[:30]
        # registered before it exists: a Ctrl-C while `ip netns add` runs must not leak it
        self.namespaces.append(ns)
        self._save_registry()
        run("ip", "netns", "add", ns)
        hdir = self.dir / name
        hdir.mkdir()
        host = LabHost(name=name, ns=ns, addr=self._alloc_ip(), dir=hdir)
        self.hosts[name] = host
        self._veth(host, "eth0")
        self.nsrun(host, "ip", "link", "set", "lo", "up")
        self.nsrun(host, "ip", "addr", "add", f"{host.addr}/{self.subnet.prefixlen}", "dev", "eth0")
        self.nsrun(host, "ip", "link", "set", "eth0", "up")
        self.nsrun(host, "ip", "route", "add", "default", "via", self.gateway, "dev", "eth0")
        if sshd:
            self.start_sshd(host, options=sshd_options)
        return host

    def nsrun(
        self, host: LabHost, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        return run("ip", "netns", "exec", host.ns, *args, check=check)

    def _write_host_key(self, host: LabHost) -> None:
        key = host.dir / "ssh_host_ed25519_key"
        for p in (key, Path(str(key) + ".pub")):
            p.unlink(missing_ok=True)
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
        host.host_key_pub = " ".join(Path(str(key) + ".pub").read_text().split()[:2])

    def start_sshd(
        self,
        host: LabHost,
        options: str = "",
        max_startups: str | None = "500",
        log_level: str = "ERROR",
    ) -> None:
        """Start the host's sshd. sshd takes the FIRST value of most keywords, so
        `max_startups` (None: OpenSSH's default 10:30:100) and `log_level` (INFO logs every
        login) are parameters rather than `options` lines."""
        if not (host.dir / "ssh_host_ed25519_key").exists():
            self._write_host_key(host)
            self.trust(host)
        # sshd honours only the FIRST SetEnv line: merge ours with any in `options` into one.
        # SHLVL=1 stops a Debian bash from sourcing ~/.bashrc for every ssh command (a root
        # .bashrc's `pyenv init` would dominate every SSH benchmark and test).
        env = ["SHLVL=1"]
        kept = []
        for line in options.splitlines():
            words = line.split()
            if words and words[0].lower() == "setenv":
                env += words[1:]
            else:
                kept.append(line)
        options = "".join(line + "\n" for line in kept)
        env_line = "SetEnv " + " ".join(env) + "\n"
        cfg = host.dir / "sshd_config"
        cfg.write_text(
            textwrap.dedent(
                f"""\
                Port 22
                ListenAddress {host.addr}
                HostKey {host.dir}/ssh_host_ed25519_key
                PidFile {host.dir}/sshd.pid
                AuthorizedKeysFile {self.authorized_keys}
                PermitRootLogin prohibit-password
                PasswordAuthentication no
                KbdInteractiveAuthentication no
                UsePAM no
                StrictModes no
                PrintMotd no
                PrintLastLog no
                MaxSessions 100
                UseDNS no
                """
            )
            + (f"MaxStartups {max_startups}\n" if max_startups else "")
            + f"LogLevel {log_level}\n"
            + env_line
            + options
        )
        host.sshd = self.spawn(
            [SSHD, "-D", "-e", "-f", str(cfg)],
            ns=host.ns,
            stderr=open(host.dir / "sshd.log", "ab"),
        )
        wait_for(lambda: port_open(host.addr, 22), 10, f"sshd on {host.name} to listen")

    def trust(self, host: LabHost) -> None:
        """Write the host's current key into the lab's known_hosts (replacing older lines)."""
        lines = [
            line
            for line in self.known_hosts.read_text().splitlines()
            if not line.startswith(host.addr + " ")
        ]
        lines.append(f"{host.addr} {host.host_key_pub}")
        self.known_hosts.write_text("\n".join(lines) + "\n")

    # ------------------------------------------------------------ a second interface
    def add_interface(self, host: LabHost, inner: str, metric: int | None = 200) -> str:
        """A second interface on the same subnet with its own default route (incident 5)."""
        addr = self._alloc_ip()
        self._veth(host, inner)
        self.nsrun(host, "ip", "addr", "add", f"{addr}/{self.subnet.prefixlen}", "dev", inner)
        self.nsrun(host, "ip", "link", "set", inner, "up")
        if metric is not None:
            self.nsrun(
                host,
                "ip",
                "route",
                "add",
                "default",
                "via",
                self.gateway,
                "dev",
                inner,
                "metric",
                str(metric),
            )
        host.extra_addrs.append(addr)
        return addr
