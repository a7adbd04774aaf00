"""Host-key verification as OpenSSH's check_host_key does it: known_hosts files in OpenSSH's
order, @revoked keys and @cert-authority CAs, host certificates, accept-new.

A REVOKED or CHANGED key is CRIT (a possible man-in-the-middle) and never connects; an
unknown one is refused unless accept_new, and then appended where ssh would append it. The
files are parsed once per patrol while unchanged (fleetcheck.transport.known_hosts)."""

from __future__ import annotations

import base64
import functools
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetcheck.core.errors import TransportError
from fleetcheck.core.model import Status
from fleetcheck.transport.filecache import ParsedFiles
from fleetcheck.transport.known_hosts import KnownHostsFile

if TYPE_CHECKING:
    from fleetcheck.config import SshConfig
    from fleetcheck.transport.known_hosts import Lookup
    from fleetcheck.transport.ssh.target import Target

_known_hosts_lock = threading.Lock()  # accept_new appends one line at a time
_known_hosts_cache = ParsedFiles(KnownHostsFile)  # an accept_new append is seen at once


# `[ssh] known_hosts` as fleetcheck's config spells its default, and what OpenSSH's own
# default UserKnownHostsFile is: a @revoked line in known_hosts2 must not be missed
_DEFAULT_KNOWN_HOSTS = ("~/.ssh/known_hosts",)
_OPENSSH_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")


def known_hosts_paths(cfg: SshConfig, target: Target) -> list[str]:
    """The files to read, user files first (the first one is where accept_new writes).
    `[ssh] known_hosts` at its default reads known_hosts2 too, as ssh's default does."""
    user = target.user_known_hosts or cfg.known_hosts_files
    if tuple(user) == _DEFAULT_KNOWN_HOSTS:
        user = _OPENSSH_USER_KNOWN_HOSTS
    files = [*user, *target.global_known_hosts]
    return list(dict.fromkeys(str(Path(p).expanduser()) for p in files if p.lower() != "none"))


def hostfile_names(target: Target) -> tuple[str, str | None, str]:
    """The names OpenSSH looks the host up by (get_hostfile_hostname_ipaddr): its
    `known_hosts_name`; the bare host as the fallback check_host_key tries when nothing is
    known under `[host]:port`; and the name certificate principals must hold."""
    name = target.known_hosts_name
    if target.host_key_alias:
        return name, None, name
    host = target.hostname.lower()
    return name, (host if target.port != 22 else None), host


def known_keys(cfg: SshConfig, target: Target) -> Lookup:
    """What known_hosts says about the target under its name (each file parsed once while
    unchanged): what orders the host-key algorithms offered."""
    return _lookup(cfg, target, hostfile_names(target)[0])


def _lookup(cfg: SshConfig, target: Target, name: str) -> Lookup:
    from fleetcheck.transport import known_hosts

    paths = known_hosts_paths(cfg, target)
    try:
        return known_hosts.lookup(_known_hosts_cache, paths, [name])
    except OSError as e:
        raise TransportError(f"cannot read known_hosts {e.filename}: {e.strerror}") from None


def verify_host_key(
    target: Target, cfg: SshConfig, found: Lookup, server_key: Any, who: str
) -> None:
    """OpenSSH's check_host_key (fleetcheck.transport.known_hosts.decide): @revoked keys and
    CAs refused, a certificate checked against the listed CAs and else dropped for its plain
    key, plain keys compared, a non-default port falling back to the bare host name;
    unknown is UNKNOWN, changed or revoked is CRIT, nothing is added unless accept_new
    (unknown only)."""
    from fleetcheck.transport import known_hosts

    name, bare, principal = hostfile_names(target)
    pb = getattr(server_key, "public_blob", None)
    cert = None
    if pb is not None and pb.key_type.endswith(known_hosts.CERT_SUFFIX):
        try:
            cert = known_hosts.parse_cert(pb.key_blob)
        except ValueError as e:
            raise TransportError(
                f"host certificate of {who} refused: {e}: not connecting", status=Status.CRIT
            ) from None
        # (a CA signature algorithm OpenSSH does not allow drops the certificate anyway)
        allowed = cert.signature_alg in known_hosts.CA_SIGNATURE_ALGORITHMS
        if allowed and not known_hosts.verify_ca_signature(cert):
            raise TransportError(
                f"host certificate of {who} refused: certificate {cert.key_id!r} has a bad "
                "CA signature: not connecting",
                status=Status.CRIT,
            )
        blob = cert.plain_blob
    else:
        blob = server_key.asbytes()
    fallback = None
    if bare is not None:
        fallback = functools.cache(lambda: _lookup(cfg, target, bare))
    d = known_hosts.decide(blob, cert, found, principal, fallback)
    if d.status == "ok":
        return
    offered = f"{server_key.get_name()} {server_key.fingerprint}"
    paths = known_hosts_paths(cfg, target)
    where = ", ".join(p for i, p in enumerate(paths) if i == 0 or os.path.exists(p))
    if d.status == "revoked":
        assert d.entry is not None
        if d.ca_revoked and cert is not None:
            raise TransportError(
                f"host certificate of {who} refused: the CA of certificate {cert.key_id!r} "
                f"is @revoked ({d.entry.where}): not connecting",
                status=Status.CRIT,
            )
        raise TransportError(
            f"host key of {who} is REVOKED ({offered} is marked @revoked in {d.entry.where}): "
            "not connecting",
            status=Status.CRIT,
        )
    if d.status == "changed":
        expected = "; ".join(f"{k.fingerprint()} ({k.where})" for k in found.keys)
        raise TransportError(
            f"host key changed for {who}: possible man-in-the-middle; not connecting "
            f"(server offered {offered}, known_hosts has {expected})",
            status=Status.CRIT,
        )
    if d.cert_problem is not None:
        raise TransportError(
            f"host certificate of {who} refused: {d.cert_problem}; its plain key {offered} is "
            f"not in {where} either: not connecting"
        )
    if not (cfg.accept_new or target.accept_new):
        ca_note = (
            " (a CA is listed for it, but the server presented no certificate)"
            if found.cas and cert is None
            else ""
        )
        raise TransportError(
            f"host key of {who} ({name}) is not in {where}{ca_note}: not "
            f"connecting (server offered {offered}; verify it and add it, or set "
            "accept_new = true)"
        )
    if not paths:
        raise TransportError(f"accept_new: no known_hosts file to add the host key of {who} to")
    path = Path(paths[0])
    plain = f"{known_hosts.blob_type(blob)} {base64.b64encode(blob).decode()}"
    line = f"{name} {plain}\n"
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
