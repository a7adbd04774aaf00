"""known_hosts the way OpenSSH reads it: several files, markers, patterns, hashed names.

Our own reader because paramiko.HostKeys refuses a whole file over one `@cert-authority` or
`@revoked` line and knows no wildcard or negated patterns. A lookup returns everything OpenSSH
weighs for a host (plain keys, CAs, revoked keys whose patterns match); patterns follow
OpenSSH's match_hostname_list. A line OpenSSH would skip is skipped here too: it never blinds
the other lines. Each file is read once per change (`KnownHostsCache`)."""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import hmac
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from fleetcheck.transport.filecache import ParsedFiles

# host-key algorithms per key type found in known_hosts (an RSA key is used with SHA-2
# signatures; paramiko never offers SHA-1 `ssh-rsa` host keys)
_ALGS_FOR_TYPE: dict[str, tuple[str, ...]] = {
    "ssh-ed25519": ("ssh-ed25519",),
    "ecdsa-sha2-nistp256": ("ecdsa-sha2-nistp256",),
    "ecdsa-sha2-nistp384": ("ecdsa-sha2-nistp384",),
    "ecdsa-sha2-nistp521": ("ecdsa-sha2-nistp521",),
    "ssh-rsa": ("rsa-sha2-512", "rsa-sha2-256"),
}
CERT_SUFFIX = "-cert-v01@openssh.com"


@dataclass(frozen=True)
class KnownEntry:
    """One known_hosts line that matched a host."""

    marker: str | None  # None, "revoked" or "cert-authority"
    keytype: str
    blob: bytes
    where: str  # "FILE:LINE", for messages

    def key(self) -> Any:
        """The paramiko key (parsed on demand: most lines are only ever compared)."""
        from paramiko import PKey

        return PKey.from_type_string(self.keytype, self.blob)

    def fingerprint(self) -> str:
        digest = base64.b64encode(hashlib.sha256(self.blob).digest()).decode().rstrip("=")
        return f"{self.keytype} SHA256:{digest}"


@dataclass
class Lookup:
    keys: list[KnownEntry] = field(default_factory=list)
    cas: list[KnownEntry] = field(default_factory=list)
    revoked: list[KnownEntry] = field(default_factory=list)

    def host_key_algorithms(self, available: tuple[str, ...]) -> tuple[str, ...]:
        """`available` (the client's algorithms, in its order) with those this host is known
        by moved to the front, as OpenSSH's order_hostkeyalgs does: certificate algorithms
        first when a CA vouches for the host, then every plain type known for it. A host is
        never "changed" because the server preferred a type we do not hold."""
        front: list[str] = []
        if self.cas:
            front += [a for a in available if a.endswith(CERT_SUFFIX)]
        for entry in self.keys:
            for alg in _ALGS_FOR_TYPE.get(entry.keytype, (entry.keytype,)):
                if alg in available and alg not in front:
                    front.append(alg)
        rest = [a for a in available if a not in front]
        return tuple(front + rest)

    def revoked_entry(self, blob: bytes) -> KnownEntry | None:
        for entry in self.revoked:
            if entry.blob == blob:
                return entry
        return None


def _match_pattern(name: str, pattern: str) -> bool:
    if pattern.startswith("|1|"):
        try:
            _, _, salt_b64, hash_b64 = pattern.split("|", 3)
            salt = base64.b64decode(salt_b64)
            want = base64.b64decode(hash_b64)
        except (ValueError, binascii.Error):
            return False
        return hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), want)
    if "*" in pattern or "?" in pattern or "[" in pattern:
        if pattern.startswith("[") and "]:" in pattern and "*" not in pattern:
            return pattern.lower() == name.lower()
        # OpenSSH wildcards are * and ? only; escape fnmatch's character classes
        escaped = pattern.lower().replace("[", "[[]")
        return fnmatch.fnmatchcase(name.lower(), escaped)
    return pattern.lower() == name.lower()


def match_host_list(name: str, patterns: list[str]) -> bool:
    """OpenSSH's match_hostname_list: a negated pattern that matches excludes the name."""
    hit = False
    for p in patterns:
        if p.startswith("!"):
            if _match_pattern(name, p[1:]):
                return False
        elif not hit and _match_pattern(name, p):
            hit = True
    return hit


class KnownHostsFile:
    """A known_hosts file: plain names indexed, everything else (hashed, wildcards) scanned."""

    def __init__(self, path: str) -> None:
        self.path = path
        # (marker, patterns, keytype, blob, lineno)
        self._plain: dict[str, list[tuple[str | None, list[str], str, bytes, int]]] = {}
        self._scan: list[tuple[str | None, list[str], str, bytes, int]] = []
        self.skipped = 0
        with open(path, encoding="utf-8", errors="replace") as f:
            for lineno, raw in enumerate(f, 1):
                line = raw.strip()
                if not line or line[0] == "#":
                    continue
                parsed = _parse_line(line, lineno)
                if parsed is None:
                    self.skipped += 1
                    continue
                _, patterns, _, _, _ = parsed
                simple = all(
                    not p.startswith(("!", "|")) and not any(c in p for c in "*?") for p in patterns
                )
                if simple:
                    for p in patterns:
                        self._plain.setdefault(p.lower(), []).append(parsed)
                else:
                    self._scan.append(parsed)

    def lookup(self, names: list[str], into: Lookup) -> None:
        seen: set[int] = set()
        found: list[tuple[str | None, list[str], str, bytes, int]] = []
        for name in names:
            for e in self._plain.get(name.lower(), ()):
                if e[4] not in seen:
                    seen.add(e[4])
                    found.append(e)
            for e in self._scan:
                if e[4] not in seen and match_host_list(name, e[1]):
                    seen.add(e[4])
                    found.append(e)
        for marker, _, keytype, blob, lineno in sorted(found, key=lambda e: e[4]):
            entry = KnownEntry(marker, keytype, blob, f"{self.path}:{lineno}")
            if marker == "revoked":
                into.revoked.append(entry)
            elif marker == "cert-authority":
                into.cas.append(entry)
            else:
                into.keys.append(entry)


def _parse_line(line: str, lineno: int) -> tuple[str | None, list[str], str, bytes, int] | None:
    fields = line.split()
    marker = None
    if fields and fields[0].startswith("@"):
        marker = fields[0][1:].lower()
        if marker not in ("revoked", "cert-authority"):
            return None  # OpenSSH skips a line with an unknown marker
        fields = fields[1:]
    if len(fields) < 3:
        return None
    hosts, keytype, b64 = fields[0], fields[1], fields[2]
    try:
        blob = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        return None
    # the blob names its own type: a line whose type field disagrees is skipped
    if len(blob) < 4:
        return None
    (n,) = struct.unpack(">I", blob[:4])
    if blob[4 : 4 + n].decode("ascii", "replace") != keytype:
        return None
    return marker, hosts.split(","), keytype, blob, lineno


class KnownHostsCache(ParsedFiles[KnownHostsFile]):
    """Parsed known_hosts files by path (see filecache: an accept_new append or the operator's
    fix is seen at once)."""

    def __init__(self) -> None:
        super().__init__(KnownHostsFile)


def lookup(cache: KnownHostsCache, paths: list[str], names: list[str]) -> Lookup:
    """Everything the files say about any of `names` (OSError propagates: unreadable file)."""
    out = Lookup()
    for path in paths:
        f = cache.get(path)
        if f is not None:
            f.lookup(names, out)
    return out


# ---------------------------------------------------------------- host certificates


@dataclass(frozen=True)
class HostCert:
    keytype: str  # e.g. ssh-ed25519-cert-v01@openssh.com
    serial: int
    cert_type: int  # 1 user, 2 host
    key_id: str
    principals: tuple[str, ...]
    valid_after: int
    valid_before: int
    ca_blob: bytes
    signed: bytes  # what the CA signed: the certificate up to and including the CA key
    signature: bytes


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def u32(self) -> int:
        (v,) = struct.unpack(">I", self.data[self.pos : self.pos + 4])
        self.pos += 4
        return int(v)

    def u64(self) -> int:
        (v,) = struct.unpack(">Q", self.data[self.pos : self.pos + 8])
        self.pos += 8
        return int(v)

    def string(self) -> bytes:
        n = self.u32()
        if self.pos + n > len(self.data):
            raise ValueError("truncated certificate")
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return v


_KEY_FIELDS = {  # how many string/mpint fields the public key has inside a certificate
    "ssh-ed25519": 1,
    "ecdsa-sha2-nistp256": 2,
    "ecdsa-sha2-nistp384": 2,
    "ecdsa-sha2-nistp521": 2,
    "ssh-rsa": 2,
}


def parse_cert(blob: bytes) -> HostCert:
    """An OpenSSH certificate (PROTOCOL.certkeys). Raises ValueError when malformed."""
    try:
        r = _Reader(blob)
        keytype = r.string().decode()
        base = keytype.removesuffix(CERT_SUFFIX)
        if base == keytype or base not in _KEY_FIELDS:
            raise ValueError(f"not a known certificate type: {keytype}")
        r.string()  # nonce
        for _ in range(_KEY_FIELDS[base]):
            r.string()
        serial = r.u64()
        cert_type = r.u32()
        key_id = r.string().decode("utf-8", "replace")
        pr = _Reader(r.string())
        principals = []
        while pr.pos < len(pr.data):
            principals.append(pr.string().decode("utf-8", "replace"))
        valid_after, valid_before = r.u64(), r.u64()
        r.string()  # critical options
        r.string()  # extensions
        r.string()  # reserved
        ca_blob = r.string()
        signed = blob[: r.pos]
        signature = r.string()
    except (struct.error, UnicodeDecodeError) as e:
        raise ValueError(f"malformed certificate: {e}") from None
    return HostCert(
        keytype, serial, cert_type, key_id, tuple(principals), valid_after, valid_before,
        ca_blob, signed, signature,
    )  # fmt: skip


class CertProblem(Exception):
    """Why a host certificate is not accepted; `mitm` when it points at an impostor."""

    def __init__(self, reason: str, mitm: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.mitm = reason, mitm


def check_host_cert(cert_blob: bytes, name: str, found: Lookup, now: float | None = None) -> str:
    """Verify a host certificate against the CAs known_hosts lists for `name` (as OpenSSH's
    check_host_cert does: host type, CA listed and not revoked, CA signature, principal,
    validity window). Returns the CA's description; raises CertProblem."""
    from paramiko.message import Message

    try:
        cert = parse_cert(cert_blob)
    except ValueError as e:
        raise CertProblem(str(e)) from None
    if cert.cert_type != 2:
        raise CertProblem(f"certificate {cert.key_id!r} is not a host certificate", mitm=True)
    ca = next((c for c in found.cas if c.blob == cert.ca_blob), None)
    if ca is None:
        raise CertProblem(f"certificate {cert.key_id!r} is signed by a CA not listed for {name}")
    revoked = found.revoked_entry(cert.ca_blob)
    if revoked is not None:
        raise CertProblem(
            f"the CA of certificate {cert.key_id!r} is @revoked ({revoked.where})", mitm=True
        )
    try:
        ok = ca.key().verify_ssh_sig(cert.signed, Message(cert.signature))
    except Exception:
        ok = False
    if not ok:
        raise CertProblem(
            f"certificate {cert.key_id!r} has a bad CA signature (listed CA {ca.fingerprint()})",
            mitm=True,
        )
    if cert.principals and name not in cert.principals:
        raise CertProblem(
            f"certificate {cert.key_id!r} is not valid for {name} "
            f"(principals: {', '.join(cert.principals)})"
        )
    t = int(time.time() if now is None else now)
    if t < cert.valid_after:
        raise CertProblem(f"certificate {cert.key_id!r} is not valid yet")
    if t >= cert.valid_before:
        raise CertProblem(f"certificate {cert.key_id!r} has expired")
    return f"certificate {cert.key_id!r} signed by CA {ca.fingerprint()} ({ca.where})"
