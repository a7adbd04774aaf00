"""The one broker client of a patrol.

Explicit connect and socket timeouts, a small retry budget (redis-py's defaults would retry for
about a minute), RESP2 unless configured, a recognisable client name, and a dead connection
dropped rather than reused (incident 3, redis-py #1789), and one connection per client
(a broker short of client slots is the failure we look for; we must not add to it). The
password comes from the URL (percent-encoded), `password_env` or `password_file` and never
appears in any message we produce. TLS (rediss://) verifies the broker's certificate against
`ca_file` and its host name unless `check_hostname = false`; Sentinel-managed brokers are
reached at the master the sentinels name when the patrol starts.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from fleetcheck.config import BrokerConfig

if TYPE_CHECKING:
    import redis


class BrokerSetupError(Exception):
    """The broker cannot even be tried (a secret missing or unreadable); one line."""


def redact_url(url: str | None) -> str:
    """The URL with its whole userinfo (user name and password) replaced by '***'."""
    if url is None:
        return "(no url)"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        return "<unparseable url>"
    if "@" not in parts.netloc:
        return url
    hostport = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc="***@" + hostport))


def scrub(text: str, secrets: list[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "***")
            quoted = quote(s, safe="")
            if quoted != s:
                text = text.replace(quoted, "***")
    return re.sub(r"([A-Za-z][A-Za-z0-9+.-]*)://[^@/\s]*@", r"\1://***@", text)


def password_of(cfg: BrokerConfig) -> str | None:
    """The broker password from the URL, `password_env` (None when that variable is unset) or
    `password_file` (read now, so a rotated secret is picked up by the next patrol). Raises
    BrokerSetupError for a password_file that cannot be read."""
    if cfg.password_env:
        # unset: no password (a broker that wants one says so, and the context adds why)
        return os.environ.get(cfg.password_env) or None
    if cfg.password_file:
        path = os.path.expanduser(cfg.password_file)
        try:
            with open(path, encoding="utf-8") as f:
                value = f.read().rstrip("\r\n")
        except OSError as e:
            raise BrokerSetupError(
                f"password_file {cfg.password_file}: cannot read: {e.strerror or e}"
            ) from None
        except UnicodeDecodeError:
            raise BrokerSetupError(f"password_file {cfg.password_file}: not UTF-8 text") from None
        if not value:
            raise BrokerSetupError(f"password_file {cfg.password_file} is empty")
        return value
    try:
        pw = urlsplit(cfg.url or "").password
    except ValueError:
        return None
    return unquote(pw) if pw is not None else None


def secrets_of(cfg: BrokerConfig) -> list[str]:
    out = []
    if cfg.sentinel_password_env and os.environ.get(cfg.sentinel_password_env):
        out.append(os.environ[cfg.sentinel_password_env])
    try:
        pw = password_of(cfg)
    except BrokerSetupError:
        pw = None
    if pw:
        out.append(pw)
    try:
        raw = urlsplit(cfg.url or "").password
    except ValueError:
        raw = None
    if raw:
        out.append(raw)
    return out


def preload() -> None:
    """Import redis-py now (a patrol that will talk to the broker does, at start-up). One that
    cannot be imported is left to the lane that connects: its rows say why, as before."""
    try:
        import redis  # noqa: F401
    except Exception:  # noqa: S110 (not swallowed: the lane's own import raises it again)
        pass


def _connection_kwargs(cfg: BrokerConfig, client_name: str | None = None) -> dict[str, Any]:
    import redis
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    kwargs: dict[str, Any] = {
        "socket_connect_timeout": cfg.connect_timeout,
        "socket_timeout": cfg.socket_timeout,
        "client_name": client_name or cfg.client_name,
        "protocol": cfg.protocol,
        "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), cfg.retries),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        "health_check_interval": 0,
    }
    driver_info = getattr(redis, "DriverInfo", None)
    if driver_info is not None:
        # the same CLIENT SETINFO as redis-py's default, without it looking its own version
        # up in the installed packages' metadata (importlib.metadata + email: ~5 ms a run)
        kwargs["driver_info"] = driver_info(lib_version=redis.__version__)
    password = password_of(cfg)
    if password is not None:
        kwargs["password"] = password
    if cfg.username is not None:
        kwargs["username"] = cfg.username
    if (cfg.url or "").startswith("rediss://") or cfg.tls:
        kwargs.update(**_tls_kwargs(cfg))
    return kwargs


def _tls_kwargs(cfg: BrokerConfig) -> dict[str, Any]:
    """TLS as configured: the broker's (or a sentinel's) certificate verified against ca_file,
    its name checked unless check_hostname = false, the client certificate when given."""
    return dict(
        ssl_cert_reqs="required",
        ssl_check_hostname=cfg.check_hostname,
        ssl_ca_certs=os.path.expanduser(cfg.ca_file) if cfg.ca_file else None,
        ssl_certfile=os.path.expanduser(cfg.cert_file) if cfg.cert_file else None,
        ssl_keyfile=os.path.expanduser(cfg.key_file) if cfg.key_file else None,
    )


def discover_master(cfg: BrokerConfig) -> tuple[str, int]:
    """(host, port) of the current master of `cfg.service`, asked of the sentinels in order.
    Raises redis errors (MasterNotFoundError names the sentinels that failed)."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    from redis.sentinel import Sentinel

    if not cfg.service:  # the config's check (sentinels need service): a second line of defence
        raise BrokerSetupError("sentinels need service (the master's name)")
    nodes = []
    for s in cfg.sentinels:
        host, _, port = s.rpartition(":")
        nodes.append((host.strip("[]"), int(port)))
    sentinel_kwargs: dict[str, Any] = {
        "socket_connect_timeout": cfg.connect_timeout,
        "socket_timeout": cfg.socket_timeout,
        "retry": Retry(NoBackoff(), 0),
        "client_name": cfg.client_name,
    }
    if cfg.tls:
        sentinel_kwargs.update(ssl=True, **_tls_kwargs(cfg))
    if cfg.sentinel_password_env:
        password = os.environ.get(cfg.sentinel_password_env)
        if not password:
            raise BrokerSetupError(f"sentinel_password_env {cfg.sentinel_password_env} is not set")
        sentinel_kwargs["password"] = password
        if cfg.sentinel_username:
            sentinel_kwargs["username"] = cfg.sentinel_username
    sentinel = Sentinel(nodes, sentinel_kwargs=sentinel_kwargs)
    try:
        host, port = sentinel.discover_master(cfg.service)
    finally:
        for node in sentinel.sentinels:
            node.close()
    return str(host), int(port)


def connect(
    cfg: BrokerConfig,
    pool_timeout: float = 20.0,
    client_name: str | None = None,
    master: tuple[str, int] | None = None,
) -> redis.Redis:
    """A client (not yet connected: the first command connects) over at most ONE connection.

    Concurrent callers share that connection and wait up to `pool_timeout` for it, so a patrol
    never costs a broker that may be short of client slots more than one of them. Brokers
    behind Sentinel: `master` is the address `discover_master` returned. Raises
    BrokerSetupError.
    """
    import redis

    kwargs = _connection_kwargs(cfg, client_name)
    if cfg.sentinels:
        if master is None:
            master = discover_master(cfg)
        pool_kwargs: dict[str, Any] = {}
        if cfg.tls:  # the master the sentinels named, over TLS as they are
            pool_kwargs["connection_class"] = redis.SSLConnection
        pool = redis.BlockingConnectionPool(
            host=master[0],
            port=master[1],
            max_connections=1,
            timeout=pool_timeout,
            **pool_kwargs,
            **kwargs,
        )
    else:
        assert cfg.url is not None
        pool = redis.BlockingConnectionPool.from_url(
            cfg.url, max_connections=1, timeout=pool_timeout, **kwargs
        )
    return redis.Redis.from_pool(pool)  # closing the client closes its pool


def describe_error(e: BaseException, cfg: BrokerConfig) -> str:
    """One line for the operator, without secrets."""
    text = str(e) or type(e).__name__
    text = text.splitlines()[0] if text else type(e).__name__
    return scrub(text, secrets_of(cfg))


REFUSED_CONNECTIONS = "maxclients"


def refusal(e: BaseException) -> tuple[str, str] | None:
    """(kind, phrase) when `e` is the broker refusing to serve (the failure itself, not a
    reason we could not look): max clients, loading, busy, MISCONF, out of memory."""
    import redis

    text = str(e)
    if isinstance(e, redis.ConnectionError) and "max number of clients reached" in text:
        return REFUSED_CONNECTIONS, "refuses new connections: max number of clients reached"
    if isinstance(e, redis.BusyLoadingError) or text.startswith("LOADING"):
        return "loading", "is loading its dataset into memory (LOADING): it serves nothing yet"
    if isinstance(e, redis.ResponseError) and text.startswith("BUSY"):
        return "busy", "is busy running a script or function (BUSY): it serves nothing else"
    if isinstance(e, redis.ResponseError) and text.startswith("MISCONF"):
        return "misconf", (
            "refuses writes and PING (MISCONF): its last RDB snapshot failed and "
            "stop-writes-on-bgsave-error is on"
        )
    if isinstance(e, redis.OutOfMemoryError) or text.startswith("OOM"):
        return "oom", "refuses writes: out of memory (used_memory over maxmemory, OOM)"
    return None


_DROPPED = ("broken pipe", "reset by peer", "closed by server")


def refusal_on_accept(e: BaseException, client: redis.Redis) -> tuple[str, str] | None:
    """`refusal` of what the broker says as it accepts a connection, asked again when `e`
    is the connection dropped under our first command. Why: a broker at maxclients writes
    "-ERR max number of clients reached" on accept and closes; redis-py writes its
    handshake at once, and when the close (a reset: our bytes were unread) arrives first,
    the refusal is lost and the error says "Broken pipe" or "reset by peer". A plain
    connection is opened once more and read for up to a second; nothing is written (a
    healthy broker says nothing until asked). Not over TLS (its refusal comes after a
    handshake we would have to make) and not for any other error: None."""
    import socket

    import redis

    if not isinstance(e, redis.ConnectionError) or not any(d in str(e).lower() for d in _DROPPED):
        return None
    pool = client.connection_pool
    if issubclass(pool.connection_class, redis.SSLConnection):
        return None
    kw = pool.connection_kwargs
    timeout = float(kw.get("socket_connect_timeout") or 2.0)
    try:
        path = kw.get("path")
        if path:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
        else:
            sock = socket.create_connection((kw["host"], int(kw["port"])), timeout)
        with sock:  # closed also when the unix socket's connect fails
            if path:
                sock.connect(str(path))
            sock.settimeout(min(timeout, 1.0))
            said = sock.recv(512)
    except (OSError, KeyError, ValueError):
        return None
    line = said.split(b"\r\n", 1)[0].decode("utf-8", "replace")
    return refusal(redis.ConnectionError(line[1:])) if line.startswith("-ERR ") else None


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


CLUSTER_REFUSAL = (
    "is a node of a Redis/Valkey Cluster (INFO cluster_enabled:1): a cluster spreads clients "
    "and keys over its nodes, and fleetcheck reads one server's CLIENT LIST and keys, so it "
    "would judge a part as the whole; point [broker] url at a standalone server, or at the "
    "master of a replicated (Sentinel) setup (docs/brokers.md: Cluster)"
)


def cluster_refusal(client: redis.Redis) -> str | None:
    """Why fleetcheck will not patrol this server (a Cluster node), None when it will. A
    server that refuses INFO (an ACL) is not refused here: the checks say what they lack."""
    try:
        section = client.info("cluster")
    except Exception:
        return None
    return CLUSTER_REFUSAL if str(section.get("cluster_enabled", "0")) == "1" else None
