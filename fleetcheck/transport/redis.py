"""The one broker client of a patrol.

Explicit connect and socket timeouts, a small retry budget (redis-py's defaults would retry for
about a minute), RESP2 unless configured, a recognisable client name, and a dead connection
dropped rather than reused (FIELD-NOTES 3, redis-py #1789). The password comes from
`password_env` or the URL and never appears in any message we produce.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from fleetcheck.config import BrokerConfig

if TYPE_CHECKING:
    import redis


def redact_url(url: str) -> str:
    """The URL with any password replaced by '***'."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def broker_address(url: str) -> str:
    """host:port (or the socket path) for messages; never includes credentials."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return parts.path
    return f"{parts.hostname}:{parts.port or 6379}"


def scrub(text: str, secrets: list[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return re.sub(r"(redis|rediss)://([^:@/\s]*):[^@/\s]*@", r"\1://\2:***@", text)


def secrets_of(cfg: BrokerConfig) -> list[str]:
    out = []
    if cfg.password_env and os.environ.get(cfg.password_env):
        out.append(os.environ[cfg.password_env])
    try:
        pw = urlsplit(cfg.url).password
    except ValueError:
        pw = None
    if pw:
        out.append(pw)
    return out


def connect(cfg: BrokerConfig) -> redis.Redis:
    """A client (not yet connected: the first command connects)."""
    import redis
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    kwargs: dict[str, Any] = {
        "socket_connect_timeout": cfg.connect_timeout,
        "socket_timeout": cfg.socket_timeout,
        "client_name": cfg.client_name,
        "protocol": cfg.protocol,
        "decode_responses": False,
        "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), cfg.retries),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        "health_check_interval": 0,
        "max_connections": 16,
    }
    if cfg.password_env:
        pw = os.environ.get(cfg.password_env)
        if pw:
            kwargs["password"] = pw
    driver_info = getattr(redis, "DriverInfo", None)
    if driver_info is not None:
        # the same CLIENT SETINFO as redis-py's default, without it looking its own version
        # up in the installed packages' metadata (importlib.metadata + email: ~5 ms a run)
        kwargs["driver_info"] = driver_info(lib_version=redis.__version__)
    return redis.Redis.from_url(cfg.url, **kwargs)


def describe_error(e: BaseException, cfg: BrokerConfig) -> str:
    """One line for the operator, without secrets."""
    text = str(e) or type(e).__name__
    text = text.splitlines()[0] if text else type(e).__name__
    return scrub(text, secrets_of(cfg))


def parse_version(text: object) -> tuple[int, ...]:
    """'7.0.15' -> (7, 0, 15); anything unreadable -> ()."""
    parts: list[int] = []
    for piece in str(text or "").split("."):
        digits = re.match(r"\d+", piece)
        if not digits:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def server_identity(info: dict[str, Any]) -> tuple[str, tuple[int, ...]]:
    """('redis' | 'valkey', version) from INFO.

    Valkey 8 reports `redis_version:7.2.4` for compatibility and its own version in
    `valkey_version`; Valkey 7.2 only says so in `server_name`. Features are decided from
    this, never by trying a command on the operator's broker.
    """
    if info.get("valkey_version") is not None:
        return "valkey", parse_version(info["valkey_version"])
    name = str(info.get("server_name") or "redis").lower()
    return ("valkey" if name == "valkey" else "redis"), parse_version(info.get("redis_version"))


# first version of each server that has the feature
_FEATURES: dict[str, dict[str, tuple[int, ...]]] = {
    "hexpire": {"redis": (7, 4), "valkey": (9, 0)},
    "lpos": {"redis": (6, 0, 6), "valkey": (7, 2)},
    "client_list_id": {"redis": (6, 2), "valkey": (7, 2)},
    "slowlog_all": {"redis": (7, 0), "valkey": (7, 2)},
}


def supports(info: dict[str, Any], feature: str) -> bool:
    """Whether the server described by INFO has `feature` (see _FEATURES). An unreadable
    version counts as not having it, so the caller falls back to the older way."""
    server, version = server_identity(info)
    first = _FEATURES[feature][server]
    return bool(version) and version >= first
