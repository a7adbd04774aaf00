"""Host keys the way OpenSSH checks them, against real sshd and with the real `ssh` client as
the oracle: what `ssh` accepts we accept, what it refuses we refuse."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fleetcheck.config import HostConfig, SshConfig
from fleetcheck.core.errors import TransportError
from fleetcheck.transport.known_hosts import KnownHostsFile, Lookup, match_host_list
from fleetcheck.transport.ssh import open_shell
from tests.lab import Lab, LabHost

CONNECT = 3.0


def keygen(path: Path, kind: str) -> str:
    """A new key of `kind`; returns 'type base64' of its public half."""
    path.unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True, timeout=60
    )
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])


def ssh_cfg(lab: Lab, known_hosts: Path | tuple[str, ...], **kw: object) -> SshConfig:
    kh = known_hosts if isinstance(known_hosts, tuple) else str(known_hosts)
    base: dict[str, object] = dict(
        user="root",
        known_hosts=kh,
        identity_file=str(lab.client_key),
        config_file="/dev/null",
        connect_timeout=CONNECT,
        command_timeout=5.0,
        use_agent=False,
    )
    base.update(kw)
    return SshConfig(**base)  # type: ignore[arg-type]


def ours(h: LabHost, cfg: SshConfig) -> str:
    """'OK' or the transport's refusal as 'STATUS: reason'."""
    try:
        shell = open_shell(HostConfig(name=h.name, ssh=h.addr), cfg)
    except TransportError as e:
        return f"{e.status.label}: {e.reason}"
    try:
        assert shell.run("printf ok", 5, 100).stdout == b"ok"
    finally:
        shell.close()
    return "OK"


def openssh(lab: Lab, h: LabHost, known_hosts: Path) -> bool:
    """Does the real ssh client connect, strictly checking `known_hosts`?"""
    proc = subprocess.run(
        [
            "ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "ConnectTimeout=5", "-i", str(lab.client_key), f"root@{h.addr}", "true",
        ],
        capture_output=True,
        timeout=30,
    )  # fmt: skip
    return proc.returncode == 0


@pytest.fixture
def multi(lab: Lab) -> tuple[LabHost, dict[str, str]]:
    """A host with ed25519, RSA and ECDSA host keys (sshd prefers ed25519)."""
    h = lab.add_host("multi", sshd=False)
    h.dir.mkdir(exist_ok=True)
    keys = {}
    opts = ""
    for kind in ("rsa", "ecdsa"):
        path = h.dir / f"ssh_host_{kind}_key"
        keys[kind] = keygen(path, kind)
        opts += f"HostKey {path}\n"
    lab.start_sshd(h, options=opts)
    keys["ed25519"] = h.host_key_pub
    return h, keys


@pytest.mark.lab
@pytest.mark.parametrize("kind", ["rsa", "ecdsa", "ed25519"])
def test_a_host_known_by_one_key_type_is_ok(
    lab: Lab, multi: tuple[LabHost, dict[str, str]], tmp_path: Path, kind: str
) -> None:
    """known_hosts holds only the RSA (or ECDSA) key: we ask for that type first, as ssh does,
    so the server's preference for ed25519 is never a false "host key changed"."""
    h, keys = multi
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{h.addr} {keys[kind]}\n")
    assert openssh(lab, h, kh)
    assert ours(h, ssh_cfg(lab, kh)) == "OK"


@pytest.mark.lab
def test_revoked_key_is_crit_and_named(
    lab: Lab, multi: tuple[LabHost, dict[str, str]], tmp_path: Path
) -> None:
    h, keys = multi
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{h.addr} {keys['ed25519']}\n@revoked * {keys['ed25519']}\n")
    assert not openssh(lab, h, kh)
    got = ours(h, ssh_cfg(lab, kh))
    assert got.startswith("CRIT: host key of")
    assert "REVOKED" in got and f"{kh}:2" in got


@pytest.mark.lab
def test_other_markers_lines_never_blind_the_file(
    lab: Lab, multi: tuple[LabHost, dict[str, str]], tmp_path: Path
) -> None:
    """A @cert-authority or @revoked line for other hosts, hashed names, wildcards and
    junk lines next to the host's own line: the host is OK (paramiko refused the file)."""
    import paramiko

    h, keys = multi
    other = keygen(tmp_path / "other", "ed25519")
    kh = tmp_path / "known_hosts"
    kh.write_text(
        f"@cert-authority *.example.org {other}\n"
        f"@revoked 10.9.9.9 {other}\n"
        "@bogus-marker x ssh-ed25519 AAAA\n"
        "10.0.0.4 ssh-ed25519 !!!not-base64\n"
        f"{paramiko.HostKeys.hash_host(h.addr)} {keys['ecdsa']}\n"
    )
    assert openssh(lab, h, kh)
    assert ours(h, ssh_cfg(lab, kh)) == "OK"


@pytest.mark.lab
def test_several_known_hosts_files(
    lab: Lab, multi: tuple[LabHost, dict[str, str]], tmp_path: Path
) -> None:
    h, keys = multi
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_text("")
    second.write_text(f"{h.addr} {keys['rsa']}\n")
    assert ours(h, ssh_cfg(lab, (str(first), str(second)))) == "OK"
    # changed in one file is changed: never masked by another file that lacks the host
    wrong = keygen(tmp_path / "wrong", "rsa")
    first.write_text(f"{h.addr} {wrong}\n")
    got = ours(h, ssh_cfg(lab, (str(first), str(tmp_path / "missing"))))
    assert got.startswith("CRIT: host key changed")


@pytest.fixture
def ca(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "host_ca"
    return path, keygen(path, "ed25519")


def certified_host(
    lab: Lab, ca: tuple[Path, str], principals: str, validity: str = "-5m:+1h"
) -> LabHost:
    """A host whose sshd presents an ed25519 host certificate signed by `ca`."""
    h = lab.add_host("cert", sshd=False)
    h.dir.mkdir(exist_ok=True)
    key = h.dir / "ssh_host_cert_key"
    keygen(key, "ed25519")
    subprocess.run(
        ["ssh-keygen", "-q", "-s", str(ca[0]), "-I", "lab-host", "-h", "-n", principals,
         "-V", validity, f"{key}.pub"],
        check=True, timeout=60,
    )  # fmt: skip
    lab.start_sshd(h, options=f"HostKey {key}\nHostCertificate {key}-cert.pub\n")
    return h


@pytest.mark.lab
def test_host_certificate_from_a_listed_ca_is_ok(
    lab: Lab, ca: tuple[Path, str], tmp_path: Path
) -> None:
    """No plain key for the host anywhere: the certificate, verified against the CA in
    known_hosts (signature, principal, validity), is what lets us in, as with ssh."""
    kh = tmp_path / "known_hosts"
    h = certified_host(lab, ca, principals="198.18.0.0,placeholder")
    subprocess.run(
        ["ssh-keygen", "-q", "-s", str(ca[0]), "-I", "lab-host", "-h", "-n", h.addr,
         "-V", "-5m:+1h", str(h.dir / "ssh_host_cert_key.pub")],
        check=True, timeout=60,
    )  # fmt: skip
    lab.stop_sshd(h)
    lab.start_sshd(
        h,
        options=f"HostKey {h.dir}/ssh_host_cert_key\n"
        f"HostCertificate {h.dir}/ssh_host_cert_key-cert.pub\n",
    )
    kh.write_text(f"@cert-authority {lab_pattern(h)} {ca[1]}\n")
    assert openssh(lab, h, kh)
    assert ours(h, ssh_cfg(lab, kh)) == "OK"


def lab_pattern(h: LabHost) -> str:
    """A known_hosts pattern for the lab's addresses (the lab picks its subnet anywhere in
    198.18.0.0/15: 198.18.* or 198.19.*)."""
    return h.addr.rsplit(".", 2)[0] + ".*"


@pytest.mark.lab
def test_host_certificate_for_another_name_is_unknown(
    lab: Lab, ca: tuple[Path, str], tmp_path: Path
) -> None:
    h = certified_host(lab, ca, principals="some-other-host")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@cert-authority {lab_pattern(h)} {ca[1]}\n")
    assert not openssh(lab, h, kh)
    got = ours(h, ssh_cfg(lab, kh))
    assert got.startswith("UNKNOWN: host certificate of"), got
    assert "not valid for " + h.addr in got and "some-other-host" in got


@pytest.mark.lab
def test_expired_host_certificate_is_unknown(
    lab: Lab, ca: tuple[Path, str], tmp_path: Path
) -> None:
    h = certified_host(lab, ca, principals="x", validity="20000101:20000102")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@cert-authority * {ca[1]}\n")
    assert not openssh(lab, h, kh)
    got = ours(h, ssh_cfg(lab, kh))
    assert got.startswith("UNKNOWN: host certificate of") and "expired" in got, got


@pytest.mark.lab
def test_host_certificate_from_an_unlisted_ca_is_unknown(lab: Lab, tmp_path: Path) -> None:
    other_ca = tmp_path / "other_ca"
    keygen(other_ca, "ed25519")
    listed = keygen(tmp_path / "listed_ca", "ed25519")
    h = certified_host(lab, (other_ca, ""), principals="198.18.0.1")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@cert-authority * {listed}\n")
    assert not openssh(lab, h, kh)
    got = ours(h, ssh_cfg(lab, kh))
    assert got.startswith("UNKNOWN:") and "CA not listed" in got, got


@pytest.mark.lab
def test_revoked_ca_is_crit(lab: Lab, ca: tuple[Path, str], tmp_path: Path) -> None:
    h = certified_host(lab, ca, principals="placeholder")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@cert-authority * {ca[1]}\n@revoked * {ca[1]}\n")
    assert not openssh(lab, h, kh)
    got = ours(h, ssh_cfg(lab, kh))
    assert got.startswith("CRIT:") and "@revoked" in got, got


# ---------------------------------------------------------------- pure: patterns and order


@pytest.mark.parametrize(
    ("name", "patterns", "expected"),
    [
        ("web1", ["web1"], True),
        ("WEB1", ["web1"], True),
        ("web1", ["web*"], True),
        ("web12", ["web?"], False),
        ("web1", ["web*", "!web1"], False),
        ("web2", ["web*", "!web1"], True),
        ("[10.0.0.3]:2222", ["[10.0.0.3]:2222"], True),
        ("10.0.0.3", ["[10.0.0.3]:2222"], False),
        ("[10.0.0.3]:2222", ["[10.0.0.*]:2222"], True),
        ("[10.0.0.3]:2222", ["[10.0.0.?]:2222"], True),  # issue 23: wildcards in brackets
        ("[10.0.0.3]:2222", ["[10.0.0.?]:2200"], False),
        ("10.0.0.3", ["10.0.0.[0-9]"], False),  # `[` is literal for OpenSSH
        ("web1", ["WEB*"], True),
        ("x", ["!y"], False),  # negation alone never matches
    ],
)
def test_host_pattern_matching(name: str, patterns: list[str], expected: bool) -> None:
    assert match_host_list(name, ",".join(patterns)) is expected


def test_hashed_names_match_only_their_host(tmp_path: Path) -> None:
    import paramiko

    key = paramiko.Ed25519Key.generate() if hasattr(paramiko.Ed25519Key, "generate") else None
    pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    kh = tmp_path / "kh"
    kh.write_text(f"{paramiko.HostKeys.hash_host('10.0.0.9')} {pub}\n")
    f = KnownHostsFile(str(kh))
    hit, miss = Lookup(), Lookup()
    f.lookup(["10.0.0.9"], hit)
    f.lookup(["10.0.0.8"], miss)
    assert len(hit.keys) == 1 and not miss.keys
    assert key is None or key  # generate() is not in every paramiko; only the file matters


def test_algorithms_follow_what_known_hosts_holds(tmp_path: Path) -> None:
    available = (
        "ssh-ed25519", "ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256",
        "ssh-ed25519-cert-v01@openssh.com",
    )  # fmt: skip
    rsa = keygen(tmp_path / "r", "rsa")
    ecdsa = keygen(tmp_path / "e", "ecdsa")
    kh = tmp_path / "kh"
    kh.write_text(f"h {rsa}\nh {ecdsa}\nca-only {ecdsa}\n")
    kh.write_text(kh.read_text().replace("ca-only", "@cert-authority ca-only"))
    f = KnownHostsFile(str(kh))
    found = Lookup()
    f.lookup(["h"], found)
    # OpenSSH's order_hostkeyalgs: the known types first in the CLIENT's order (not the
    # file's: issue 23, the file order let a right RSA line hide a wrong ed25519 one)
    assert found.host_key_algorithms(available) == (
        "ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256", "ssh-ed25519",
        "ssh-ed25519-cert-v01@openssh.com",
    )  # fmt: skip
    ca_only = Lookup()
    f.lookup(["ca-only"], ca_only)
    assert ca_only.host_key_algorithms(available)[0] == "ssh-ed25519-cert-v01@openssh.com"
    assert Lookup().host_key_algorithms(available) == available


@pytest.mark.lab
def test_unreadable_known_hosts_is_unknown_and_named(lab: Lab, tmp_path: Path) -> None:
    h = lab.add_host("a")
    got = ours(h, ssh_cfg(lab, tmp_path))  # a directory: cannot be read as a file
    assert got.startswith("UNKNOWN: cannot read known_hosts") and str(tmp_path) in got, got


# ---------------------------------------------------------------- pure: OpenSSH's rules (issue 23)
# The lab harness (tests/ssh_diff_hostkeys) checks these against the real client; here the
# same rules without a lab, so a regression shows in the fast suite too.


def _ed25519(seed: int) -> str:
    import base64
    import struct

    blob = struct.pack(">I", 11) + b"ssh-ed25519" + struct.pack(">I", 32) + bytes([seed]) * 32
    return "ssh-ed25519 " + base64.b64encode(blob).decode()


def _found(text: str, tmp_path: Path, name: str) -> Lookup:
    kh = tmp_path / "kh"
    kh.write_bytes(text.encode())
    out = Lookup()
    KnownHostsFile(str(kh)).lookup([name], out)
    return out


def test_a_bare_cr_does_not_end_a_line(tmp_path: Path) -> None:
    a, b = _ed25519(1), _ed25519(2)
    assert not _found(f"x {a}\rh {b}\r", tmp_path, "h").keys
    assert not _found(f"h {a}\rx {b}\r", tmp_path, "h").keys  # the blob runs into line 2
    assert len(_found(f"h {a} comment\rx {b}\r", tmp_path, "h").keys) == 1
    assert len(_found(f"h {a}\r\nx {b}\r\n", tmp_path, "h").keys) == 1  # CRLF is fine


def test_markers_are_case_sensitive(tmp_path: Path) -> None:
    a = _ed25519(1)
    found = _found(
        f"@CERT-AUTHORITY * {a}\n@REVOKED * {a}\n@revoked @revoked * {a}\n", tmp_path, "h"
    )
    assert not found.cas and not found.revoked and not found.keys
    found = _found(f"@cert-authority * {a}\n@revoked  * {a}\n", tmp_path, "h")
    assert len(found.cas) == 1 and len(found.revoked) == 1


def test_key_lines_as_sshkey_read_takes_them(tmp_path: Path) -> None:
    import base64

    a = _ed25519(1)
    b64 = a.split()[1]
    trailing = base64.b64encode(base64.b64decode(b64) + bytes(4)).decode()
    for bad in (
        f"h SSH-ED25519 {b64}",
        f"h ssh-ed25519 {trailing}",
        f"h ecdsa-sha2-nistp256 {b64}",
    ):
        assert not _found(bad + "\n", tmp_path, "h").keys, bad
    assert _found(f"\t h\t{a}\t c\n", tmp_path, "h").keys


def test_order_follows_the_client_list_and_skips_revoked_first_lines(tmp_path: Path) -> None:
    from fleetcheck.transport.known_hosts import OPENSSH_HOSTKEY_ALGS as ALGS

    ed = _ed25519(1)
    rsa = keygen(tmp_path / "r", "rsa")
    both = _found(f"h {rsa}\nh {ed}\n", tmp_path, "h")
    assert both.host_key_algorithms(ALGS) == ALGS  # ed25519 known: the list as it is
    revoked = _found(f"h {ed}\nh {rsa}\n@revoked * {ed}\n", tmp_path, "h")
    order = revoked.host_key_algorithms(ALGS)
    assert order[:4] == (
        "rsa-sha2-512-cert-v01@openssh.com", "rsa-sha2-256-cert-v01@openssh.com",
        "rsa-sha2-512", "rsa-sha2-256",
    )  # fmt: skip


def test_verdicts_as_check_host_key_gives_them(tmp_path: Path) -> None:
    import base64

    from fleetcheck.transport.known_hosts import decide

    a, b = _ed25519(1), _ed25519(2)
    blob = base64.b64decode(a.split()[1])
    assert decide(blob, None, _found(f"h {a}\n", tmp_path, "h"), "h").status == "ok"
    assert decide(blob, None, _found(f"h {b}\n", tmp_path, "h"), "h").status == "changed"
    assert decide(blob, None, _found("", tmp_path, "h"), "h").status == "new"
    revoked = _found(f"h {a}\n@revoked * {a}\n", tmp_path, "h")
    assert decide(blob, None, revoked, "h").status == "revoked"
    # a non-default port: nothing under [h]:2222, the bare name is asked
    bare = _found(f"h {a}\n", tmp_path, "h")
    port = Lookup()
    assert decide(blob, None, port, "h", lambda: bare).status == "ok"
    wrong = _found(f"h {b}\n", tmp_path, "h")
    assert decide(blob, None, port, "h", lambda: wrong).status == "new"


def test_host_key_alias_is_lower_cased_and_gets_no_port() -> None:
    from fleetcheck.transport.ssh.hostkeys import hostfile_names
    from fleetcheck.transport.ssh.target import Target

    t = Target(alias="x", hostname="10.0.0.1", port=2222, user="u", identity_files=())
    assert hostfile_names(t) == ("[10.0.0.1]:2222", "10.0.0.1", "10.0.0.1")
    aliased = Target(
        alias="x", hostname="10.0.0.1", port=2222, user="u", identity_files=(),
        host_key_alias="Web-Alias",
    )  # fmt: skip
    assert hostfile_names(aliased) == ("web-alias", None, "web-alias")
