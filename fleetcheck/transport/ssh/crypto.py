"""The transport's algorithm lists as OpenSSH 9.2's client would offer them.

paramiko's own lists include CBC ciphers, 3DES and MD5 MACs that OpenSSH's client no longer
offers, and ignore the operator's `Ciphers`, `MACs` and `KexAlgorithms`: a server that speaks
only what ssh refuses would be reached by fleetcheck alone. So each list starts from OpenSSH's
default (myproposal.h at V_9_2_P1), takes the ssh_config value as ssh reads it (a plain list
replaces the default; `+` appends, `-` removes (wildcards allowed), `^` puts first), and keeps
what paramiko can speak, in that order. A value that leaves nothing fleetcheck can speak
refuses the host with one line naming the keyword, its file and line: ssh might connect with an
algorithm paramiko lacks (chacha20-poly1305, umac), but fleetcheck never falls back to one
the operator excluded."""

from __future__ import annotations

from fnmatch import fnmatchcase

from fleetcheck.core.errors import TransportError

CIPHERS = (
    "chacha20-poly1305@openssh.com", "aes128-ctr", "aes192-ctr", "aes256-ctr",
    "aes128-gcm@openssh.com", "aes256-gcm@openssh.com",
)  # fmt: skip
MACS = (
    "umac-64-etm@openssh.com", "umac-128-etm@openssh.com", "hmac-sha2-256-etm@openssh.com",
    "hmac-sha2-512-etm@openssh.com", "hmac-sha1-etm@openssh.com", "umac-64@openssh.com",
    "umac-128@openssh.com", "hmac-sha2-256", "hmac-sha2-512", "hmac-sha1",
)  # fmt: skip
KEX = (
    "sntrup761x25519-sha512@openssh.com", "curve25519-sha256", "curve25519-sha256@libssh.org",
    "ecdh-sha2-nistp256", "ecdh-sha2-nistp384", "ecdh-sha2-nistp521",
    "diffie-hellman-group-exchange-sha256", "diffie-hellman-group16-sha512",
    "diffie-hellman-group18-sha512", "diffie-hellman-group14-sha256",
)  # fmt: skip
DEFAULTS = {"ciphers": CIPHERS, "macs": MACS, "kexalgorithms": KEX}
SPELLING = {"ciphers": "Ciphers", "macs": "MACs", "kexalgorithms": "KexAlgorithms"}


def openssh_list(default: tuple[str, ...], value: str | None) -> tuple[str, ...]:
    """The list ssh uses for one keyword (kex.c kex_assemble_names), given its value."""
    if value is None:
        return default
    names = [n for n in value[1:].split(",") if n] if value[:1] in "+-^" else []
    if value.startswith("+"):
        return tuple(dict.fromkeys([*default, *names]))
    if value.startswith("-"):
        return tuple(d for d in default if not any(fnmatchcase(d, p) for p in names))
    if value.startswith("^"):
        return tuple(dict.fromkeys([*names, *default]))
    return tuple(dict.fromkeys(n for n in value.split(",") if n))


def offered(
    keyword: str, paramiko_list: tuple[str, ...], setting: tuple[str, str] | None
) -> tuple[str, ...]:
    """What to offer for `keyword` ("ciphers", "macs", "kexalgorithms"): OpenSSH's list as the
    setting (where, value) makes it, cut to what paramiko speaks, in OpenSSH's order."""
    where, value = setting if setting is not None else ("", None)
    wanted = openssh_list(DEFAULTS[keyword], value)
    kept = tuple(a for a in wanted if a in paramiko_list)
    if kept:
        return kept
    if value is None:  # a paramiko sharing nothing with OpenSSH's defaults: its own lists
        return paramiko_list
    raise TransportError(
        f"ssh config: {where}: {SPELLING[keyword]} {value}: fleetcheck speaks none of these "
        f"(it can offer {', '.join(paramiko_list)}); ssh would use them, fleetcheck will not "
        "fall back to an algorithm the line excludes"
    )
