"""ssh_config's lexical rules and value checks, as OpenSSH 9.2's readconf.c/misc.c apply them.

Why a module of its own: OpenSSH refuses a whole config for one bad line anywhere in it (an
unknown keyword, a keyword with extra arguments, `ConnectTimeout 1.5`, `Port 0`, a misquoted
`Match exec`), even inside a Host block that does not apply. A reader that accepts what ssh
refuses lets the patrol connect where the operator's own `ssh` would not, so every line is
checked here against OpenSSH's keyword table before any of it is applied. Pure functions, no
I/O but `getservbyname` (the local services database, as ssh's a2port).
"""

from __future__ import annotations

import fnmatch
import re
import socket
import threading

WHITESPACE = " \t\r\n"


class SyntaxRefusal(ValueError):
    """A line OpenSSH would refuse; the caller adds the file and line."""


# ----------------------------------------------------------------- splitting


def strdelim(s: str | None) -> tuple[str | None, str | None]:
    """misc.c strdelim(): the next word and the rest. Words end at whitespace, one '=' or a
    double quote (only double quotes group words here, unlike argv_split: why `Match exec
    'a b'` is refused by ssh). Returns (None, None) for a missing closing quote."""
    if s is None:
        return None, None
    idx = next((i for i, c in enumerate(s) if c in WHITESPACE + '"='), None)
    if idx is None:
        return s, None
    if s[idx] == '"':
        s2 = s[:idx] + s[idx + 1 :]
        end = s2.find('"', idx)
        if end < 0:
            return None, None
        rest = s2[end + 1 :]
        return s2[:end], rest.lstrip(WHITESPACE)
    had_equals = s[idx] == "="
    rest = s[idx + 1 :].lstrip(WHITESPACE)
    if rest.startswith("=") and not had_equals:
        rest = rest[1:].lstrip(WHITESPACE)
    return s[:idx], rest


def argv_split(text: str) -> list[str]:
    """misc.c argv_split() with terminate_on_comment: words split at space/tab, '' and ""
    group, backslash unescapes a quote or backslash anywhere (and a space outside quotes), a
    word starting with # ends the line. Raises SyntaxRefusal on an unterminated quote."""
    args: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] in " \t":
            i += 1
            continue
        if text[i] == "#":
            break
        word: list[str] = []
        quote = ""
        while i < n:
            c = text[i]
            if c == "\\" and i + 1 < n:
                nxt = text[i + 1]
                if nxt in "'\"\\" or (not quote and nxt == " "):
                    i += 1
                    word.append(nxt)
                else:
                    word.append(c)
            elif not quote and c in " \t":
                break
            elif not quote and c in "\"'":
                quote = c
            elif quote and c == quote:
                quote = ""
            else:
                word.append(c)
            i += 1
        if i >= n and quote:
            raise SyntaxRefusal("invalid quotes")
        args.append("".join(word))
    return args


# ----------------------------------------------------------------- values


def convtime(s: str) -> int:
    """misc.c convtime(): 90, 1m30s, 2h; seconds. Raises SyntaxRefusal ("1.5" is not a time)."""
    if not s:
        raise SyntaxRefusal("invalid time value")
    total = 0
    units = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    for m in re.finditer(r"(\d+)([sSmMhHdDwW]?)|(.)", s):
        if m.group(3) is not None:
            raise SyntaxRefusal("invalid time value")
        total += int(m.group(1)) * units[m.group(2).lower()]
    if total > 2**31 - 1:
        raise SyntaxRefusal("invalid time value")
    return total


# getservbyname(3) answers in one static buffer that the next call overwrites, and Python
# calls it without holding the interpreter: two hosts' configs resolved at once could read
# each other's port (`Port http` read as 22)
_SERVICES = threading.Lock()


def a2port(s: str) -> int:
    """misc.c a2port(): a number 1-65535 or a service name from the local services database
    (`Port ssh` is 22); 0 and anything else are refused as ssh refuses them."""
    if re.fullmatch(r"[ \t]*[+-]?[0-9]+", s):
        value = int(s)
        if 0 < value <= 65535:
            return value
        if 0 <= value <= 65535:
            raise SyntaxRefusal(f"Bad port '{s}'")
    try:
        with _SERVICES:
            value = socket.getservbyname(s, "tcp")
    except (OSError, UnicodeError, ValueError):
        raise SyntaxRefusal(f"Bad port '{s}'") from None
    if value <= 0:
        raise SyntaxRefusal(f"Bad port '{s}'")
    return value


def atoi(s: str) -> int:
    if not re.fullmatch(r"[ \t]*\+?[0-9]+", s) or int(s) > 2**31 - 1:
        raise SyntaxRefusal(f"integer value {s!r} invalid")
    return int(s)


_FLAG = ("true", "false", "yes", "no")
_MULTI: dict[str, tuple[str, ...]] = {
    "stricthostkeychecking": (*_FLAG, "ask", "off", "accept-new"),
    "verifyhostkeydns": (*_FLAG, "ask"),
    "updatehostkeys": (*_FLAG, "ask"),
    "addressfamily": ("inet", "inet6", "any"),
    "controlmaster": (*_FLAG, "auto", "ask", "autoask"),
    "tunnel": (*_FLAG, "ethernet", "point-to-point"),
    "requesttty": (*_FLAG, "force", "auto"),
    "sessiontype": ("none", "subsystem", "default"),
    "canonicalizehostname": (*_FLAG, "always"),
    "pubkeyauthentication": (*_FLAG, "unbound", "host-bound"),
    "dsaauthentication": (*_FLAG, "unbound", "host-bound"),
    "compression": ("yes", "no"),
    "loglevel": tuple(
        x.lower() for x in "QUIET FATAL ERROR INFO VERBOSE DEBUG DEBUG1 DEBUG2 DEBUG3".split()
    ),
}
_FLAGS = set(
    """forwardx11 forwardx11trusted gatewayports exitonforwardfailure passwordauthentication
    kbdinteractiveauthentication challengeresponseauthentication skeyauthentication
    tisauthentication hostbasedauthentication batchmode checkhostip tcpkeepalive keepalive
    nohostauthenticationforlocalhost clearallforwardings enablesshkeysign identitiesonly
    hashknownhosts permitlocalcommand visualhostkey stdinnull forkafterauthentication
    proxyusefdpass canonicalizefallbacklocal streamlocalbindunlink enableescapecommandline
    gssapiauthentication gssapidelegatecredentials gssapikeyexchange gssapitrustdns
    gssapirenewalforcesrekey""".split()
)
_TIMES = {"connecttimeout", "serveraliveinterval", "forwardx11timeout"}
_INTS = {
    "connectionattempts",
    "numberofpasswordprompts",
    "serveralivecountmax",
    "canonicalizemaxdots",
    "requiredrsasize",
}
# exactly one argument (value checks beyond that are ssh's, for keywords fleetcheck ignores)
_STRINGS = set(
    """user hostname hostkeyalias preferredauthentications bindaddress bindinterface
    pkcs11provider smartcarddevice securitykeyprovider xauthlocation kbdinteractivedevices
    controlpath revokedhostkeys ignoreunknown identityfile identityfile2 certificatefile port
    escapechar syslogfacility ciphers macs kexalgorithms hostkeyalgorithms casignaturealgorithms
    pubkeyacceptedalgorithms pubkeyacceptedkeytypes hostbasedacceptedalgorithms
    hostbasedkeytypes fingerprinthash streamlocalbindmask tunneldevice identityagent
    forwardagent addkeystoagent gssapikexalgorithms gssapiclientidentity
    gssapiserveridentity""".split()
)
# one or more arguments
_ARRAYS = set(
    """userknownhostsfile globalknownhostsfile logverbose canonicaldomains
    canonicalizepermittedcnames sendenv setenv permitremoteopen""".split()
)
# the raw rest of the line is the value
_COMMANDS = {"proxycommand", "proxyjump", "localcommand", "remotecommand", "knownhostscommand"}
# arguments checked by ssh in ways fleetcheck does not repeat (they change nothing we do)
_LOOSE = {
    "localforward": 2,
    "remoteforward": 2,
    "dynamicforward": 1,
    "ipqos": 2,
    "rekeylimit": 2,
    "controlpersist": 1,
}
# accepted and ignored by ssh (deprecated or not compiled in): any arguments
_IGNORED = set(
    """protocol cipher fallbacktorsh globalknownhostsfile2 rhostsauthentication
    userknownhostsfile2 useroaming usersh useprivilegedport afstokenpassing
    kerberosauthentication kerberostgtpassing rsaauthentication rhostsrsaauthentication
    compressionlevel""".split()
)
_STRUCTURE = {"host", "match", "include"}

KEYWORDS = (
    frozenset(set(_MULTI) | _FLAGS | _TIMES | _INTS | _STRINGS | _ARRAYS | _COMMANDS | set(_LOOSE))
    | _IGNORED
    | _STRUCTURE
)


def is_keyword(keyword: str) -> bool:
    return keyword in KEYWORDS


def check_args(keyword: str, args: list[str]) -> None:
    """The checks readconf.c makes of one line's arguments whether or not the line applies
    (argument count, flag and multistate values, times, integers, ports). Raises
    SyntaxRefusal with OpenSSH's reason."""
    if keyword in _IGNORED or keyword in _STRUCTURE or keyword in _COMMANDS:
        return
    if not args or args[0] == "":
        raise SyntaxRefusal("missing argument")
    first = args[0]
    if keyword in _ARRAYS:
        if any(a == "" for a in args):
            raise SyntaxRefusal(f"keyword {keyword} empty argument")
        lowered = [a.lower() for a in args]
        if keyword == "setenv" and any("=" not in a for a in args):
            raise SyntaxRefusal("Invalid SetEnv (each argument is NAME=VALUE)")
        if "none" in lowered and len(args) > 1 and keyword != "setenv":
            raise SyntaxRefusal(f'keyword {keyword} "none" argument must appear alone')
        return
    limit = _LOOSE.get(keyword, 1)
    if len(args) > limit:
        raise SyntaxRefusal(f"keyword {keyword} extra arguments at end of line")
    if keyword in _FLAGS and first.lower() not in _FLAG:
        raise SyntaxRefusal(f"{keyword}: expected yes or no, got {first!r} (unsupported option)")
    if keyword in _MULTI and first.lower() not in _MULTI[keyword]:
        raise SyntaxRefusal(
            f"{_NAMES.get(keyword, keyword)} {first!r} is not valid (unsupported option; "
            f"one of {', '.join(_MULTI[keyword])})"
        )
    if keyword in _TIMES and first != "none":
        try:
            convtime(first)
        except SyntaxRefusal:
            raise SyntaxRefusal(
                f"{_NAMES.get(keyword, keyword)} {first!r} is not a time (invalid time value: "
                "whole seconds, or units like 1m30s)"
            ) from None
    if keyword in _INTS:
        atoi(first)
    if keyword in _ALGO_KEYWORDS:
        _check_algorithms(keyword, first)
    if keyword == "port":
        try:
            a2port(first)
        except SyntaxRefusal:
            raise SyntaxRefusal(
                f"Port {first!r} is not a port number (Bad port: 1-65535 or a service name)"
            ) from None


# OpenSSH 9.2's algorithm names (`ssh -Q cipher|mac|kex|key-sig`): a list naming one it does
# not know is refused by ssh, so it is refused here too, though paramiko negotiates its own
_CIPHERS = frozenset(
    """3des-cbc aes128-cbc aes192-cbc aes256-cbc aes128-ctr aes192-ctr aes256-ctr
    aes128-gcm@openssh.com aes256-gcm@openssh.com chacha20-poly1305@openssh.com""".split()
)
_MACS = frozenset(
    """hmac-sha1 hmac-sha1-96 hmac-sha2-256 hmac-sha2-512 hmac-md5 hmac-md5-96
    umac-64@openssh.com umac-128@openssh.com hmac-sha1-etm@openssh.com
    hmac-sha1-96-etm@openssh.com hmac-sha2-256-etm@openssh.com hmac-sha2-512-etm@openssh.com
    hmac-md5-etm@openssh.com hmac-md5-96-etm@openssh.com umac-64-etm@openssh.com
    umac-128-etm@openssh.com""".split()
)
_KEX = frozenset(
    """diffie-hellman-group1-sha1 diffie-hellman-group14-sha1 diffie-hellman-group14-sha256
    diffie-hellman-group16-sha512 diffie-hellman-group18-sha512
    diffie-hellman-group-exchange-sha1 diffie-hellman-group-exchange-sha256 ecdh-sha2-nistp256
    ecdh-sha2-nistp384 ecdh-sha2-nistp521 curve25519-sha256 curve25519-sha256@libssh.org
    sntrup761x25519-sha512 sntrup761x25519-sha512@openssh.com""".split()
)
_KEY_ALGOS = tuple(
    """ssh-ed25519 ssh-ed25519-cert-v01@openssh.com sk-ssh-ed25519@openssh.com
    sk-ssh-ed25519-cert-v01@openssh.com ecdsa-sha2-nistp256
    ecdsa-sha2-nistp256-cert-v01@openssh.com ecdsa-sha2-nistp384
    ecdsa-sha2-nistp384-cert-v01@openssh.com ecdsa-sha2-nistp521
    ecdsa-sha2-nistp521-cert-v01@openssh.com sk-ecdsa-sha2-nistp256@openssh.com
    sk-ecdsa-sha2-nistp256-cert-v01@openssh.com webauthn-sk-ecdsa-sha2-nistp256@openssh.com
    ssh-dss ssh-dss-cert-v01@openssh.com ssh-rsa ssh-rsa-cert-v01@openssh.com rsa-sha2-256
    rsa-sha2-256-cert-v01@openssh.com rsa-sha2-512 rsa-sha2-512-cert-v01@openssh.com""".split()
)
_ALGO_KEYWORDS = {
    "ciphers": ("cipher", _CIPHERS),
    "macs": ("MAC", _MACS),
    "kexalgorithms": ("KEX algorithm", _KEX),
    "hostkeyalgorithms": ("key type", None),
    "pubkeyacceptedalgorithms": ("key type", None),
    "pubkeyacceptedkeytypes": ("key type", None),
    "hostbasedacceptedalgorithms": ("key type", None),
    "hostbasedkeytypes": ("key type", None),
    "casignaturealgorithms": ("key type", None),
}


def _check_algorithms(keyword: str, value: str) -> None:
    """readconf.c: a list starting with '-' is not checked; '+' and '^' are stripped; every
    name must be known (key types may be patterns that match at least one, either way)."""
    if value.startswith("-"):
        return
    kind, known = _ALGO_KEYWORDS[keyword]
    names = value[1:] if value[:1] in "+^" else value
    if not names:
        raise SyntaxRefusal(f"Bad {kind} list {value!r}")
    for name in names.split(","):
        if name == "":
            break  # strsep stops at an empty name
        if known is not None:
            ok = name in known
        else:
            ok = name in _KEY_ALGOS or any(
                match_pattern_list(k, name, lower=False) or _negated_hit(k, name)
                for k in _KEY_ALGOS
            )
        if not ok:
            raise SyntaxRefusal(f"Bad {kind} {name!r} in {value!r} (OpenSSH 9.2 does not know it)")


def _negated_hit(name: str, patterns: str) -> bool:
    return any(p.startswith("!") and match_pattern(name, p[1:]) for p in patterns.split(","))


_NAMES = {
    "connecttimeout": "ConnectTimeout",
    "serveraliveinterval": "ServerAliveInterval",
    "stricthostkeychecking": "StrictHostKeyChecking",
    "canonicalizehostname": "CanonicalizeHostname",
}


# ----------------------------------------------------------------- patterns and hops


def match_pattern(s: str, pattern: str) -> bool:
    """OpenSSH's match_pattern: only * and ? are special."""
    return fnmatch.fnmatchcase(s, pattern.replace("[", "[[]"))


def match_pattern_list(s: str, patterns: str, lower: bool) -> bool:
    """OpenSSH's match_pattern_list: comma-separated, a matching !pattern vetoes; `lower`
    lower-cases the patterns (never the string: `Match host WEB` misses the argument WEB)."""
    hit = False
    for p in patterns.split(","):
        if lower:
            p = p.lower()
        if p.startswith("!"):
            if match_pattern(s, p[1:]):
                return False
        elif match_pattern(s, p):
            hit = True
    return hit


def parse_jump(text: str) -> str:
    """readconf.c parse_jump: `none`, or hops `[user@]host[:port]` / `ssh://user@host:port`
    separated by commas (a # starts a comment); returned as ssh -G prints it. An invalid hop
    is refused whether or not the line applies."""
    if text.lower() == "none":
        return "none"
    spec = text.split("#", 1)[0].rstrip(WHITESPACE)
    hops = spec.split(",")
    parsed = [_parse_hop(h, text) for h in hops]
    user, host, port = parsed[-1]
    numeric = ":" in host or all(c in "0123456789." for c in host)
    last = (
        (f"{user}@" if user else "")
        + (f"[{host}]" if numeric else host)
        + (f":{port}" if port > 0 else "")
    )
    return ",".join([*hops[:-1], last]) if len(hops) > 1 else last


def _parse_hop(hop: str, text: str) -> tuple[str | None, str, int]:
    bad = SyntaxRefusal(f'Invalid ProxyJump "{text}"')
    s = hop
    if s.startswith("ssh://"):
        s = s[len("ssh://") :].rstrip("/")
    user: str | None = None
    if "@" in s:
        user, s = s.rsplit("@", 1)
        if not user:
            raise bad
    port_s = ""
    if s.startswith("["):
        host, sep, after = s[1:].partition("]")
        if not sep or (after and not after.startswith(":")):
            raise bad
        port_s = after[1:]
    else:
        host, _, port_s = s.partition(":")
        if ":" in port_s:
            raise bad
    if not host:
        raise bad
    port = -1
    if port_s:
        try:
            port = a2port(port_s)
        except SyntaxRefusal:
            raise bad from None
    return user, host, port
