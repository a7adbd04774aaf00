"""known_hosts the way OpenSSH 9.2 reads and weighs it: several files, markers, patterns,
hashed names, the host-key algorithm order, and check_host_key's verdict.

Our own reader because paramiko.HostKeys refuses a whole file over one `@cert-authority` or
`@revoked` line and knows no wildcard or negated patterns. Every rule here is OpenSSH's
(hostfile.c, match.c, sshkey.c, sshconnect.c, sshconnect2.c), checked against the real client
by tests/ssh_diff_hostkeys: lines end at "\\n" only (a bare CR is part of the line), fields are
split on space and tab only, markers are case-sensitive, patterns know `*` and `?` only, a
line OpenSSH would skip is skipped here too (it never blinds the other lines). Each file is
read once per change (filecache.ParsedFiles), plain names are indexed: a lookup is a dict probe
plus a scan of the wildcard and hashed lines."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleetcheck.transport.filecache import ParsedFiles
from fleetcheck.transport.host_certs import (  # noqa: F401  (re-exported)
    CA_SIGNATURE_ALGORITHMS,
    CERT_SUFFIX,
    KEY_FIELDS,
    HostCert,
    Reader,
    blob_type,
    cert_problem,
    parse_cert,
    verify_ca_signature,
)
from fleetcheck.transport.ssh_config_syntax import match_pattern_list

# OpenSSH 9.2's HostKeyAlgorithms default (KEX_DEFAULT_PK_ALG) less the security-key types
# paramiko cannot verify: what we offer, reordered per host as order_hostkeyalgs does
OPENSSH_HOSTKEY_ALGS = (
    "ssh-ed25519-cert-v01@openssh.com",
    "ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com",
    "ecdsa-sha2-nistp521-cert-v01@openssh.com",
    "rsa-sha2-512-cert-v01@openssh.com",
    "rsa-sha2-256-cert-v01@openssh.com",
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "rsa-sha2-512",
    "rsa-sha2-256",
)
# the key type names sshkey_read accepts at the start of a key (exactly, case included)
_PLAIN_TYPES = (*KEY_FIELDS, "sk-ecdsa-sha2-nistp256@openssh.com", "sk-ssh-ed25519@openssh.com")
_KEY_TYPES = frozenset(
    [*_PLAIN_TYPES, *(t.removesuffix("@openssh.com") + CERT_SUFFIX for t in _PLAIN_TYPES)]
)
_SPACE = re.compile(r"[ \t]+")
_B64_WS = str.maketrans("", "", " \t\n\v\f\r")  # b64_pton skips isspace()


def plain_type(alg: str) -> str:
    """The key type an algorithm is used with (rsa-sha2-512-cert-v01@openssh.com: ssh-rsa)."""
    base = alg.removesuffix(CERT_SUFFIX)
    return "ssh-rsa" if base.startswith("rsa-sha2-") else base


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
        """OpenSSH's order_hostkeyalgs over `available` (the client's list, in its order):
        used as it is when a plain key of the first algorithm's type is known; otherwise the
        algorithms whose key type known_hosts holds (certificate ones too), and every
        certificate algorithm when a @cert-authority line matches, come first, each group in
        `available`'s order. So the server negotiates what OpenSSH's would: a wrong ed25519
        line is never hidden behind a right RSA line. A type counts as known when its first
        line is not @revoked (lookup_key_in_hostkeys_by_type checks the key it found)."""
        known: set[str] = set()
        first_seen: set[str] = set()
        revoked = {r.blob for r in self.revoked}
        for k in self.keys:
            if k.keytype not in first_seen:
                first_seen.add(k.keytype)
                if k.blob not in revoked:
                    known.add(k.keytype)
        if not known and not self.cas:
            return available
        if available and plain_type(available[0]) in known:
            return available
        first = [
            a for a in available if (self.cas and a.endswith(CERT_SUFFIX)) or plain_type(a) in known
        ]
        return tuple(first + [a for a in available if a not in first])


def _match_hashed(name: str, field_: str) -> bool | None:
    """A `|1|salt|hash` field (the whole field: no comma list). None: malformed, which makes
    OpenSSH skip the line."""
    try:
        magic, salt_b64, hash_b64 = field_[1:].split("|")
        if magic != "1":
            return None
        salt = base64.b64decode(salt_b64, validate=True)
        want = base64.b64decode(hash_b64, validate=True)
    except (ValueError, binascii.Error):
        return None
    if len(salt) != 20:
        return None
    return hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), want)


def match_host_list(name: str, hosts: str) -> bool:
    """OpenSSH's match_hostname_list over a comma-separated host field: name and patterns
    lower-cased, a negated pattern that matches excludes the name."""
    return match_pattern_list(name.lower(), hosts, lower=True)


# (marker, host field, keytype, blob, lineno)
_Line = tuple[str | None, str, str, bytes, int]


class KnownHostsFile:
    """A known_hosts file: plain names indexed, everything else (hashed, wildcards) scanned."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._plain: dict[str, list[_Line]] = {}
        self._scan: list[_Line] = []
        self.skipped = 0
        with open(path, "rb") as f:
            data = f.read()
        # getline(3) and strcspn(line, "\n"): a bare CR does not end a line
        for lineno, raw in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
            line = raw.lstrip(" \t")
            if not line or line[0] == "#":
                continue
            parsed = _parse_line(line, lineno)
            if parsed is None:
                self.skipped += 1
                continue
            hosts = parsed[1]
            patterns = hosts.split(",")
            simple = not hosts.startswith("|") and all(
                not p.startswith("!") and "*" not in p and "?" not in p for p in patterns
            )
            if simple:
                for p in dict.fromkeys(p.lower() for p in patterns):
                    self._plain.setdefault(p, []).append(parsed)
            else:
                self._scan.append(parsed)

    def lookup(self, names: list[str], into: Lookup) -> None:
        seen: set[int] = set()
        found: list[_Line] = []
        for name in names:
            name = name.lower()
            for e in self._plain.get(name, ()):
                if e[4] not in seen:
                    seen.add(e[4])
                    found.append(e)
            for e in self._scan:
                if e[4] in seen:
                    continue
                hosts = e[1]
                if hosts.startswith("|"):
                    hit = _match_hashed(name, hosts) is True
                else:
                    hit = match_host_list(name, hosts)
                if hit:
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


def _marker(line: str) -> tuple[str | None, str] | None:
    """hostfile.c's check_markers: `@cert-authority` or `@revoked`, exactly (an upper-case
    or unknown marker, or two markers, make OpenSSH skip the line)."""
    if not line.startswith("@"):
        return None, line
    end = line.find(" ")  # the first space anywhere, a tab only when there is no space
    if end < 0:
        end = line.find("\t")
    if end < 0:
        return None
    word = line[:end]
    if word not in ("@cert-authority", "@revoked"):
        return None
    rest = line[end:].lstrip(" \t")
    if rest.startswith("@"):
        return None
    return word[1:], rest


def _valid_blob(keytype: str, blob: bytes) -> bool:
    """sshkey_fromb: the blob names the line's key type, holds that type's fields and
    nothing after them (an ECDSA key names its own curve)."""
    try:
        fields = Reader(blob).strings()
    except ValueError:
        return False
    if not fields or fields[0] != keytype.encode():
        return False
    want = KEY_FIELDS.get(keytype)
    if want is None:
        return True  # security-key and certificate types: the header is what we check
    if len(fields) != 1 + want:
        return False
    if keytype == "ssh-ed25519":
        return len(fields[1]) == 32
    if keytype.startswith("ecdsa-sha2-"):
        return fields[1] == keytype.removeprefix("ecdsa-sha2-").encode()
    return True


def _parse_line(line: str, lineno: int) -> _Line | None:
    """One line (leading blanks and comments already dropped) as OpenSSH's
    hostkeys_foreach_file and sshkey_read parse it; None when OpenSSH skips it."""
    got = _marker(line)
    if got is None:
        return None
    marker, rest = got
    parts = _SPACE.split(rest, maxsplit=3)
    if len(parts) < 3 or parts[1].startswith("#"):
        return None
    hosts, keytype, b64 = parts[0], parts[1], parts[2]
    if keytype not in _KEY_TYPES or not b64:
        return None
    try:
        blob = base64.b64decode(b64.translate(_B64_WS), validate=True)
    except (binascii.Error, ValueError):
        return None
    if not _valid_blob(keytype, blob):
        return None
    return marker, hosts, keytype, blob, lineno


def lookup(cache: ParsedFiles[KnownHostsFile], paths: list[str], names: list[str]) -> Lookup:
    """Everything the files say about any of `names` (OSError propagates: unreadable file)."""
    out = Lookup()
    for path in paths:
        f = cache.get(path)
        if f is not None:
            f.lookup(names, out)
    return out


# ---------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class Decision:
    """check_host_key's outcome: `status` ok, new (unknown), changed or revoked; `entry` the
    line that decided (the matching key or CA, the @revoked line, a differing key);
    `cert_problem` why a presented certificate was dropped for its plain key."""

    status: str
    entry: KnownEntry | None = None
    cert_problem: str | None = None
    ca_revoked: bool = False


def _status(found: Lookup, blob: bytes, cert: HostCert | None) -> tuple[str, KnownEntry | None]:
    """hostfile.c's check_hostkeys_by_key_or_type, revocation included: any @revoked line
    equal to the key (a certificate's own key or its CA) wins, CA listed or not."""
    for r in found.revoked:
        if r.blob == blob or (cert is not None and r.blob == cert.ca_blob):
            return "revoked", r
    if cert is not None:
        ca = next((c for c in found.cas if c.blob == cert.ca_blob), None)
        return ("ok", ca) if ca is not None else ("new", None)
    key = next((k for k in found.keys if k.blob == blob), None)
    if key is not None:
        return "ok", key
    if found.keys:  # a key of any type is known and none is this one
        return "changed", found.keys[-1]
    return "new", None


def decide(
    blob: bytes,
    cert: HostCert | None,
    found: Lookup,
    name: str,
    fallback: Callable[[], Lookup] | None = None,
    now: float | None = None,
) -> Decision:
    """OpenSSH's check_host_key for the key the server presented (`blob`, its plain public
    key; `cert` when it came as a certificate), against `found` (what known_hosts says
    under the host's name) and, for a non-default port without HostKeyAlias, `fallback`
    (the same files under the bare host name, tried when nothing is known under
    `[host]:port`). A certificate that is not good enough is dropped and its plain key
    judged, as OpenSSH does, unless it or its CA is @revoked. `name` is what certificate
    principals must hold."""
    problem: str | None = None
    while True:
        st, entry = _status(found, blob, cert)
        if st == "revoked":
            ca = cert is not None and entry is not None and entry.blob == cert.ca_blob
            return Decision("revoked", entry, problem, ca_revoked=ca)
        if st == "ok":
            if cert is None:
                return Decision("ok", entry, problem)
            problem = cert_problem(cert, name, now)
            if problem is None:
                return Decision("ok", entry, None)
        else:
            if cert is not None and found.cas and problem is None:
                problem = f"certificate {cert.key_id!r} is signed by a CA not listed for {name}"
            if st == "new" and fallback is not None:
                sub = decide(blob, cert, fallback(), name, None, now)
                if sub.status == "ok":
                    return sub
                problem = problem or sub.cert_problem
        if cert is None:
            return Decision(st, entry, problem)
        cert = None  # "No matching CA found. Retry with plain key"
