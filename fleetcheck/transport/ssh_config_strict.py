"""ssh_config keywords that can make OpenSSH refuse a connection or a host key, which
fleetcheck does not carry out: a host whose resolved options set one of them (to a value that
can refuse) is refused with one line naming the keyword, file and line: never connect where
ssh would refuse. docs/ssh.md lists each one as a documented refusal.

Not here: Ciphers, KexAlgorithms and MACs (CRYPTO_KEYWORDS). fleetcheck carries them out as
ssh does (transport.ssh.crypto), so a hardened `Host *` is obeyed, not refused."""

from __future__ import annotations

CRYPTO_KEYWORDS = ("ciphers", "macs", "kexalgorithms")

# keyword (lower case) -> (as ssh_config(5) spells it, what ssh does with it)
STRICTER: dict[str, tuple[str, str]] = {
    "revokedhostkeys": ("RevokedHostKeys", "ssh refuses a host key listed in that file"),
    "knownhostscommand": ("KnownHostsCommand", "ssh checks host keys the command prints"),
    "hostkeyalgorithms": (
        "HostKeyAlgorithms",
        "ssh offers only those host key types, in that order, and refuses a server without one",
    ),
    "casignaturealgorithms": (
        "CASignatureAlgorithms",
        "ssh refuses a host certificate signed with another algorithm",
    ),
    "checkhostip": (
        "CheckHostIP",
        "ssh also checks the address's key in known_hosts and refuses a changed one",
    ),
    "verifyhostkeydns": ("VerifyHostKeyDNS", "ssh checks the host key against SSHFP records"),
    "requiredrsasize": ("RequiredRSASize", "ssh refuses smaller RSA keys"),
}
_YES = ("yes", "true")


def refuses(keyword: str, args: list[str]) -> bool:
    """Can this (first, applied) value make ssh refuse where fleetcheck would connect?
    Lists that only add ("+") or reorder ("^") keep every algorithm ssh would negotiate;
    HostKeyAlgorithms set at all turns off ssh's ordering by known_hosts, so it always can."""
    one = args[0] if args else ""
    v = one.lower()
    if keyword in ("revokedhostkeys", "knownhostscommand"):
        return v != "none"
    if keyword == "hostkeyalgorithms":
        return True
    if keyword == "casignaturealgorithms":
        return not one.startswith(("+", "^"))
    if keyword == "checkhostip":
        return v in _YES
    if keyword == "verifyhostkeydns":
        return v in (*_YES, "ask")
    if keyword == "requiredrsasize":
        return not one.isdigit() or int(one) > 1024  # 1024: ssh's default minimum
    return False


def refusal(keyword: str, args: list[str], where: str) -> str:
    """The one line a refused host gets."""
    name, effect = STRICTER[keyword]
    value = " ".join(args)
    return (
        f"{where}: {name} {value}: {effect}; fleetcheck does not, so it refuses the host "
        "rather than connect where ssh may refuse (remove the line or make it not apply)"
    )
