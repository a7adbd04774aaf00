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
    if db and not db.isdigit():
        raise InvalidValue(key, "the path must be a database number (/0)")
    return normal
