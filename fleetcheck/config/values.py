"""Config values and their errors: the Duration and LocalFile markers, ConfigError (phrased
for the operator) and InvalidValue (raised by a config class), names and broker URLs."""

from __future__ import annotations

import re
from typing import Annotated

DURATION = "duration"
Duration = Annotated[float, DURATION]
"""Seconds; written in TOML as "900s", "15m", "1h30m" or a plain number."""

LOCAL_FILE = "local file"
LocalFile = Annotated[str, LOCAL_FILE]
"""A path on the machine that runs fleetcheck (`config check` verifies it can be read)."""

IP_ADDRESS = "ip address"
IpAddress = Annotated[str, IP_ADDRESS]
"""One IPv4 or IPv6 address (as a host shows it in CLIENT LIST); `[::1]` brackets allowed."""

MAX_DURATION = 366 * 86400.0
"""No config duration is longer: past a year a value is a typo that would overflow the clock
arithmetic or never end a wait."""
MAX_DURATION_TEXT = "366d"
MAX_HOST_NAME = 253  # a DNS name's limit: names go into labels, file names and status lines
MAX_SSH_TARGET = 1024

SEARCH_HINT = "--config/-c, $FLEETCHECK_CONFIG, ./hosts.toml, ~/.config/fleetcheck/hosts.toml"


class ConfigError(Exception):
    """A config problem, already phrased for the operator: 'FILE: [TABLE] KEY: what is wrong'."""


class InvalidValue(ValueError):
    """Raised by a config dataclass's __post_init__: which key is wrong, and why."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


SAFE_NAME = re.compile(r"[A-Za-z0-9._:@-]+")
"""Host and check names: they end up in Nagios status lines (where `|` starts the perfdata),
Prometheus and Alertmanager labels, file names and shell-quoted fragments."""
SAFE_NAME_TEXT = "letters, digits, '.', '_', '-', ':' and '@'"
URL_SCHEMES = {"redis": "redis", "rediss": "rediss", "unix": "unix"}
URL_ALIASES = {"valkey": "redis", "valkeys": "rediss"}  # what Valkey's own clients accept
RESERVED_IN_USERINFO = "/?#[]@"


def check_port(key: str, port: int | None) -> None:
    if port is not None and not 1 <= port <= 65535:
        raise InvalidValue(key, f"port {port} is out of range (1-65535)")


def normalise_broker_url(url: str, key: str = "url") -> str:
    """The URL with its scheme lower-cased and Valkey's aliases mapped (valkey:// is redis://,
    valkeys:// is rediss://); InvalidValue otherwise. No message ever repeats the URL's
    userinfo: a password typed into the URL must not reach cron mail or the journal."""
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", url)
    if not m:
        raise InvalidValue(
            key,
            "not a broker URL: expected redis://HOST:PORT/DB, rediss:// (TLS), "
            "valkey://, valkeys:// or unix:///PATH",
        )
    given = m.group(1)
    scheme = URL_ALIASES.get(given.lower(), given.lower())
    if scheme not in URL_SCHEMES:
        raise InvalidValue(
            key,
            f"unsupported scheme {given}://: use redis://, rediss:// (TLS), valkey://, "
            "valkeys:// or unix://",
        )
    rest = url[m.end() :]
    if "@" in rest:
        userinfo = rest.rsplit("@", 1)[0]
        if any(c in userinfo for c in RESERVED_IN_USERINFO) or any(
            c.isspace() or ord(c) < 32 for c in userinfo
        ):
            raise InvalidValue(
                key,
                "the user name or password holds a character that must be percent-encoded "
                "(/ as %2F, ? as %3F, # as %23, @ as %40, [ ] as %5B %5D), or move the "
                "password to password_env or password_file",
            )
        if re.search(r"%(?![0-9A-Fa-f]{2})", userinfo):
            raise InvalidValue(
                key, "the user name or password has a '%' not followed by two hex digits"
            )
    normal = f"{scheme}://{rest}"
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(normal)
        port = parts.port
    except ValueError:
        raise InvalidValue(key, "the port is not a number between 1 and 65535") from None
    if scheme == "unix":
        if not parts.path:
            raise InvalidValue(
                key, "a unix:// URL needs the socket's path (unix:///run/redis.sock)"
            )
        return normal
    if not parts.hostname:
        raise InvalidValue(key, "no host name")
    if port is not None:
        check_port(key, port)
    db = parts.path.strip("/")
    if db and not (db.isascii() and db.isdigit()):
        raise InvalidValue(key, "the path must be a database number (/0)")
    return normal


def check_at_most(key: str, seconds: float, limit: float, limit_text: str) -> None:
    """InvalidValue when a duration is past the table's bound for it (docs/configuration.md)."""
    if seconds > limit:
        raise InvalidValue(key, f"must be at most {limit_text}")


def check_span(key: str, seconds: float, limit: float, limit_text: str) -> None:
    """InvalidValue unless a duration is longer than 0s and at most its bound."""
    if seconds <= 0:
        raise InvalidValue(key, "must be longer than 0s")
    check_at_most(key, seconds, limit, limit_text)


def ip_address_problem(text: str) -> str | None:
    """Why `text` is not one IP address (None when it is). A network (`10.0.0.0/24`) is
    named as one: CLIENT LIST shows single addresses, so a network would never match."""
    import ipaddress

    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        ipaddress.ip_address(bare)
        return None
    except ValueError:
        pass
    if "/" in bare:
        try:
            ipaddress.ip_network(bare, strict=False)
        except ValueError:
            return f"{text!r} is neither an IP address nor a valid network"
        return (
            f"{text!r} is a network: list the host's single addresses as CLIENT LIST shows "
            "them (e.g. 192.168.1.20)"
        )
    return f"{text!r} is not an IP address (e.g. 192.168.1.20 or fd00::20)"


def ssh_target_problem(value: str) -> str | None:
    """Why `value` cannot be a host's `ssh` (None when it can): it becomes an ssh_config
    lookup, a connection target and text in messages, so no spaces, controls or line breaks,
    no leading '-' (an ssh client would read an option), and a bounded length."""
    if not value:
        return "must not be empty"
    if len(value) > MAX_SSH_TARGET:
        return f"is {len(value)} characters long (at most {MAX_SSH_TARGET})"
    if any(c.isspace() or not c.isprintable() for c in value):
        return f"{value!r} holds a space, control character or line break"
    if value.startswith("-"):
        return f"{value!r} starts with '-'"
    return None
