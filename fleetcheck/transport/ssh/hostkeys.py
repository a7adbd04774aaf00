"""Host-key verification as OpenSSH's check_host_key does it: known_hosts files in OpenSSH's
order, @revoked keys and @cert-authority CAs, host certificates, accept-new.

A REVOKED or CHANGED key is CRIT (a possible man-in-the-middle) and never connects; an
unknown one is refused unless accept_new, and then appended where ssh would append it. The
files are parsed once per patrol while unchanged (fleetcheck.transport.known_hosts)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetcheck.core.errors import TransportError
from fleetcheck.core.model import Status
from fleetcheck.transport.known_hosts import KnownHostsCache

if TYPE_CHECKING:
    from fleetcheck.config import SshConfig
    from fleetcheck.transport.known_hosts import Lookup
    from fleetcheck.transport.ssh.target import Target

# the certificate host-key types, asked for only when a CA vouches for the host (paramiko
# offers none by default)
CERT_ALGS = (
    "ssh-ed25519-cert-v01@openssh.com",
    "ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com",
    "ecdsa-sha2-nistp521-cert-v01@openssh.com",
    "rsa-sha2-512-cert-v01@openssh.com",
    "rsa-sha2-256-cert-v01@openssh.com",
)
_known_hosts_lock = threading.Lock()  # accept_new appends one line at a time
_known_hosts_cache = KnownHostsCache()


def known_hosts_paths(cfg: SshConfig, target: Target) -> list[str]:
    """The files to read, user files first (the first one is where accept_new writes)."""
    user = target.user_known_hosts or cfg.known_hosts_files
    files = [*user, *target.global_known_hosts]
    return list(dict.fromkeys(str(Path(p).expanduser()) for p in files if p.lower() != "none"))


def known_keys(cfg: SshConfig, target: Target) -> Lookup:
    """What known_hosts says about the target (each file parsed once while unchanged)."""
    from fleetcheck.transport import known_hosts

    paths = known_hosts_paths(cfg, target)
    try:
        return known_hosts.lookup(_known_hosts_cache, paths, [target.known_hosts_name])
    except OSError as e:
        raise TransportError(f"cannot read known_hosts {e.filename}: {e.strerror}") from None


def verify_host_key(
    target: Target, cfg: SshConfig, found: Lookup, server_key: Any, who: str
) -> None:
    """OpenSSH's check_host_key: revoked keys refused, certificates checked against the
    listed CAs, plain keys compared; unknown is UNKNOWN, changed is CRIT, neither is added
    unless accept_new (unknown only)."""
    from fleetcheck.transport import known_hosts

    paths = known_hosts_paths(cfg, target)
    where = ", ".join(p for i, p in enumerate(paths) if i == 0 or os.path.exists(p))
    blob = server_key.asbytes()
    offered = f"{server_key.get_name()} {server_key.fingerprint}"
    revoked = found.revoked_entry(blob)
    if revoked is not None:
        raise TransportError(
            f"host key of {who} is REVOKED ({offered} is marked @revoked in {revoked.where}): "
            "not connecting",
            status=Status.CRIT,
        )
    cert = getattr(server_key, "public_blob", None)
    cert_problem: str | None = None
    if cert is not None and cert.key_type.endswith(known_hosts.CERT_SUFFIX):
        name = target.known_hosts_host
        try:
            known_hosts.check_host_cert(cert.key_blob, name, found)
            return
        except known_hosts.CertProblem as e:
            if e.mitm:
                raise TransportError(
                    f"host certificate of {who} refused: {e.reason}: not connecting",
                    status=Status.CRIT,
                ) from None
            cert_problem = e.reason
    same_type = [k for k in found.keys if k.keytype == server_key.get_name()]
    if any(k.blob == blob for k in same_type):
        return
    if found.keys:
        expected = "; ".join(f"{k.fingerprint()} ({k.where})" for k in found.keys)
        raise TransportError(
            f"host key changed for {who}: possible man-in-the-middle; not connecting "
            f"(server offered {offered}, known_hosts has {expected})",
            status=Status.CRIT,
        )
    if cert_problem is not None:
        raise TransportError(
            f"host certificate of {who} refused: {cert_problem}; its plain key {offered} is "
            f"not in {where} either: not connecting"
        )
    if not (cfg.accept_new or target.accept_new):
        ca_note = (
            " (a CA is listed for it, but the server presented no certificate)"
            if (found.cas)
            else ""
        )
        raise TransportError(
            f"host key of {who} ({target.known_hosts_name}) is not in {where}{ca_note}: not "
            f"connecting (server offered {offered}; verify it and add it, or set "
            "accept_new = true)"
        )
    if not paths:
        raise TransportError(f"accept_new: no known_hosts file to add the host key of {who} to")
    path = Path(paths[0])
    line = f"{target.known_hosts_name} {server_key.get_name()} {server_key.get_base64()}\n"
    with _known_hosts_lock:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a") as f:
                f.write(line)
        except OSError as e:
            raise TransportError(
                f"accept_new: cannot add the host key of {who} to {path}: {e.strerror}"
            ) from None
