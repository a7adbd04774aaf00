"""OpenSSH host certificates (PROTOCOL.certkeys): parsed and judged as sshkey_cert_check_host
does, because paramiko only reads them.

A certificate that fails here is not an alarm by itself: OpenSSH then drops the certificate
and judges the plain key inside it (check_host_key's "Retry with plain key"), so the caller
falls back too. Only a bad CA signature (OpenSSH cannot even parse such a key) is final."""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

CERT_SUFFIX = "-cert-v01@openssh.com"

# how many string/mpint fields the public key has inside a certificate (and in its plain blob)
KEY_FIELDS = {
    "ssh-ed25519": 1,
    "ecdsa-sha2-nistp256": 2,
    "ecdsa-sha2-nistp384": 2,
    "ecdsa-sha2-nistp521": 2,
    "ssh-rsa": 2,
    "ssh-dss": 4,
}
# OpenSSH 9.2's CASignatureAlgorithms default: a CA signature made with SHA-1 `ssh-rsa`
# (or DSA) is refused, and the plain key is judged instead
CA_SIGNATURE_ALGORITHMS = frozenset(
    {
        "ssh-ed25519",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
        "rsa-sha2-512",
        "rsa-sha2-256",
    }
)


@dataclass(frozen=True)
class HostCert:
    keytype: str  # e.g. ssh-ed25519-cert-v01@openssh.com
    serial: int
    cert_type: int  # 1 user, 2 host
    key_id: str
    principals: tuple[str, ...]
    valid_after: int
    valid_before: int
    critical: bytes  # the critical options, still encoded (any at all refuses a host cert)
    ca_blob: bytes
    signed: bytes  # what the CA signed: the certificate up to and including the CA key
    signature: bytes
    plain_blob: bytes  # the certified key as a plain public key (what @revoked lines hold)

    @property
    def signature_alg(self) -> str:
        try:
            return Reader(self.signature).string().decode("ascii", "replace")
        except ValueError:
            return ""


class Reader:
    """SSH wire format (RFC 4251): u32, u64 and length-prefixed strings; ValueError when the
    data ends early."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("truncated certificate")
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return v

    def u32(self) -> int:
        return int(struct.unpack(">I", self._take(4))[0])

    def u64(self) -> int:
        return int(struct.unpack(">Q", self._take(8))[0])

    def string(self) -> bytes:
        return self._take(self.u32())

    def strings(self) -> list[bytes]:
        """Every string up to the end of the data."""
        out = []
        while self.pos < len(self.data):
            out.append(self.string())
        return out


def _ssh_string(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def parse_cert(blob: bytes) -> HostCert:
    """An OpenSSH certificate. Raises ValueError when malformed."""
    try:
        r = Reader(blob)
        keytype = r.string().decode()
        base = keytype.removesuffix(CERT_SUFFIX)
        if base == keytype or base not in KEY_FIELDS:
            raise ValueError(f"not a known certificate type: {keytype}")
        r.string()  # nonce
        key_fields = [r.string() for _ in range(KEY_FIELDS[base])]
        serial = r.u64()
        cert_type = r.u32()
        key_id = r.string().decode("utf-8", "replace")
        principals = [p.decode("utf-8", "replace") for p in Reader(r.string()).strings()]
        valid_after, valid_before = r.u64(), r.u64()
        critical = r.string()
        r.string()  # extensions
        r.string()  # reserved
        ca_blob = r.string()
        signed = blob[: r.pos]
        signature = r.string()
    except (struct.error, UnicodeDecodeError) as e:
        raise ValueError(f"malformed certificate: {e}") from None
    plain = _ssh_string(base.encode()) + b"".join(_ssh_string(f) for f in key_fields)
    return HostCert(
        keytype, serial, cert_type, key_id, tuple(principals), valid_after, valid_before,
        critical, ca_blob, signed, signature, plain,
    )  # fmt: skip


def blob_type(blob: bytes) -> str:
    """The key type a public key blob names in its first field."""
    try:
        return Reader(blob).string().decode("ascii", "replace")
    except ValueError:
        return ""


def verify_ca_signature(cert: HostCert) -> bool:
    """The CA's signature over the certificate, by the CA key it carries (OpenSSH checks it
    when it parses the key, before any known_hosts line is read)."""
    from paramiko import PKey
    from paramiko.message import Message

    try:
        ok = PKey.from_type_string(blob_type(cert.ca_blob), cert.ca_blob).verify_ssh_sig(
            cert.signed, Message(cert.signature)
        )
    except Exception:
        ok = False
    return bool(ok)


def cert_problem(cert: HostCert, name: str, now: float | None = None) -> str | None:
    """sshkey_cert_check_host's verdict (None: valid for `name`), checks in its order: a host
    certificate, inside its validity window, `name` among its principals (an empty list
    means any host), no critical options, a CA signature algorithm OpenSSH allows."""
    if cert.cert_type != 2:
        return f"certificate {cert.key_id!r} is not a host certificate"
    t = int(time.time() if now is None else now)
    if t < cert.valid_after:
        return f"certificate {cert.key_id!r} is not valid yet"
    if t >= cert.valid_before:
        return f"certificate {cert.key_id!r} has expired"
    if cert.principals and name not in cert.principals:
        return (
            f"certificate {cert.key_id!r} is not valid for {name} "
            f"(principals: {', '.join(cert.principals)})"
        )
    if cert.critical:
        return f"certificate {cert.key_id!r} contains unsupported critical options"
    alg = cert.signature_alg
    if alg not in CA_SIGNATURE_ALGORITHMS:
        return f"certificate {cert.key_id!r} is signed with the disallowed algorithm {alg}"
    return None
