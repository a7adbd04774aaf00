"""`fleetcheck config discover`: a hosts.toml draft from what the broker already sees.

It only reads, and boundedly: CLIENT LIST and INFO once, a SCAN of at most `scan_limit` keys
with TYPE and sizes, a few sample values of the likely live hash and queues. What cannot be
guessed is left as a TODO that fails `fleetcheck config check` until filled in."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from fleetcheck.config import BrokerConfig, FleetConfig
from fleetcheck.core.discovery import (
    LIVE_WORDS,
    QUEUE_WORDS,
    TODO,
    KeyInfo,
    Sample,
    _has_word,
    comment,
    toml_str,
)
from fleetcheck.discover_hosts import HALF_OPEN_IDLE, HostDraft
from fleetcheck.parse.clientlist import normalise_ip

# ---------------------------------------------------------------- broker sampling (I/O)


HASH_SAMPLES = 20  # hashes whose values are sampled (most live-like names first)
LIST_SAMPLES = 50  # lists whose head element is read
# values read per sampled hash, at random: the live hash is the one where most are objects with
# a start time; 10 keep a few malformed entries from hiding it
VALUE_SAMPLES = 10


def sample_broker(r: Any, db: int, scan_limit: int = 10000, count: int = 500) -> Sample:
    """Read what the draft needs from the broker (see the module docstring)."""
    from fleetcheck.parse.clientlist import parse_client_list

    # one round trip for who we are, who else is connected and INFO
    pipe = r.pipeline(transaction=False)
    pipe.execute_command("CLIENT", "ID")
    pipe.execute_command("CLIENT", "LIST")
    pipe.info()
    own, raw, info = pipe.execute()
    clients = [c for c in parse_client_list(raw) if c.id != int(own)]
    keyspace = info.get(f"db{db}")
    db_keys = int(keyspace["keys"]) if isinstance(keyspace, dict) and "keys" in keyspace else None
    seen: list[bytes] = []
    cursor = 0
    calls = 0
    max_calls = max(10, 4 * scan_limit // max(1, count))
    while True:
        cursor, batch = r.scan(cursor=cursor, count=count)
        calls += 1
        seen.extend(batch[: scan_limit - len(seen)])
        if int(cursor) == 0 or len(seen) >= scan_limit or calls >= max_calls:
            break
    complete = int(cursor) == 0
    keys: list[KeyInfo] = []
    for start in range(0, len(seen), 500):
        chunk = seen[start : start + 500]
        pipe = r.pipeline(transaction=False)
        for k in chunk:
            pipe.type(k)
        types = [t.decode() if isinstance(t, bytes) else str(t) for t in pipe.execute()]
        pipe = r.pipeline(transaction=False)
        wanted = [(k, t) for k, t in zip(chunk, types, strict=True) if t in ("hash", "list")]
        for k, t in wanted:
            (pipe.hlen if t == "hash" else pipe.llen)(k)
        for (k, t), size in zip(wanted, pipe.execute(), strict=True):
            keys.append(KeyInfo(k.decode("utf-8", "replace"), t, int(size)))
    keys = _with_samples(r, keys)
    names = [k.decode("utf-8", "replace") for k in seen]
    queues = queues_from_shapes(names, _shape_reads(r, names))
    return Sample(clients, info, keys, len(seen), complete, db_keys, queues)


SHAPE_READS = 50  # rq workers whose `queues` field is read


def _shape_reads(r: Any, names: list[str]) -> dict[str, list[str]]:
    """What the known frameworks' own keys say about their queues (read-only: SMEMBERS of
    `rq:queues` and Sidekiq's `queues`, HGET queues of up to SHAPE_READS rq workers)."""
    import redis

    wanted = set(names)
    out: dict[str, list[str]] = {}
    for key in ("rq:queues", "queues"):
        if key in wanted:
            with contextlib.suppress(redis.ResponseError):  # not a set: not that framework's key
                out[key] = [_text(m) for m in r.smembers(key)]
    workers = [n for n in names if n.startswith("rq:worker:") and n.count(":") == 2]
    for key in workers[:SHAPE_READS]:
        try:
            value = r.hget(key, "queues")
        except redis.ResponseError:
            continue
        if value:
            out[key] = [q.strip() for q in _text(value).split(",") if q.strip()]
    return out


def queues_from_shapes(names: Iterable[str], reads: dict[str, list[str]]) -> dict[str, str]:
    """{queue key: why} from the keys of known job frameworks, so a queue that is empty
    now (an empty list does not exist in Redis) is proposed too: rq (`rq:queues`, each
    worker's `queues`), Sidekiq (`queues` -> `queue:NAME`), Celery/kombu
    (`_kombu.binding.NAME` -> `NAME`), BullMQ (`bull:NAME:meta|id` -> `bull:NAME:wait`)."""
    out: dict[str, str] = {}
    for key in reads.get("rq:queues", []):
        out.setdefault(key, "rq:queues lists it")
    for key, queues in reads.items():
        if key.startswith("rq:worker:"):
            for q in queues:
                out.setdefault(f"rq:queue:{q}", f"consumed by rq worker {key[len('rq:worker:') :]}")
    for q in reads.get("queues", []):
        out.setdefault(f"queue:{q}", "Sidekiq's queues set lists it")
    for n in names:
        if n.startswith("_kombu.binding.") and len(n) > len("_kombu.binding."):
            out.setdefault(n[len("_kombu.binding.") :], "a Celery (kombu) binding names it")
        m = re.fullmatch(r"(bull:[^:]+):(?:meta|id)", n)
        if m:
            out.setdefault(f"{m.group(1)}:wait", "a BullMQ queue's keys name it")
    return {k: v for k, v in out.items() if k and len(k) <= 512}


def sample_within(broker: BrokerConfig, seconds: float, scan_limit: int = 10000) -> Sample:
    """`sample_broker`, connecting included, within one overall deadline (DeadlineExpired): a
    broker dripping a byte per socket timeout never trips a timeout."""
    from fleetcheck.transport.deadline import run_within
    from fleetcheck.transport.redis import connect

    clients: list[Any] = []

    def work() -> Sample:
        clients.append(connect(broker))
        try:
            db = int(clients[0].connection_pool.connection_kwargs.get("db") or 0)
            return sample_broker(clients[0], db, scan_limit=scan_limit)
        finally:
            clients[0].close()

    def abandon() -> None:  # the blocked read fails at once
        for r in clients:
            r.close()

    return run_within(seconds, work, abandon)


def _with_samples(r: Any, keys: list[KeyInfo]) -> list[KeyInfo]:
    import redis

    def likely(kind: str, words: tuple[str, ...], n: int) -> list[KeyInfo]:
        """The keys of `kind` most likely to matter: named with `words` first, then largest."""
        chosen = (k for k in keys if k.type == kind)
        return sorted(chosen, key=lambda k: (not _has_word(k.key, words), -k.size))[:n]

    hashes = likely("hash", LIVE_WORDS, HASH_SAMPLES)
    lists = likely("list", QUEUE_WORDS, LIST_SAMPLES)
    sampled: dict[str, tuple[str, ...]] = {}
    for k in hashes:
        try:
            flat = r.execute_command("HRANDFIELD", k.key, VALUE_SAMPLES, "WITHVALUES")
        except redis.ResponseError:  # before Redis 6.2: one HSCAN page, cut to the same
            _, page = r.hscan(k.key, 0, count=VALUE_SAMPLES)
            flat = [x for pair in list(page.items())[:VALUE_SAMPLES] for x in pair]
        values = flat[1::2][:VALUE_SAMPLES]
        sampled[k.key] = tuple(_text(v) for v in values)
    for k in lists:
        head = r.lindex(k.key, 0)
        sampled[k.key] = () if head is None else (_text(head),)
    return [
        KeyInfo(k.key, k.type, k.size, sampled.get(k.key, ())) if k.key in sampled else k
        for k in keys
    ]


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value[:4096].decode("utf-8", "replace")
    return str(value)[:4096]


# ---------------------------------------------------------------- the draft


def broker_table(broker: BrokerConfig) -> list[str]:
    """The [broker] table for the draft: how this run reached the broker, minus secrets (the
    URL's password is left out: a draft gets shared; password_env says where it lives)."""
    import dataclasses

    lines = ["[broker]"]
    defaults = BrokerConfig(url="redis://x")
    for f in dataclasses.fields(BrokerConfig):
        value = getattr(broker, f.name)
        if f.name == "url":
            if value is None:
                continue
            public = public_url(value)
            lines.append(f"url = {toml_str(public)}")
            if public != value and broker.password_env is None and broker.password_file is None:
                lines.append("# the URL's password was left out: put it in an environment variable")
                lines.append('# password_env = "TODO"  # TODO: that variable\'s name')
            continue
        if value == getattr(defaults, f.name):
            continue
        lines.append(f"{f.name} = {_toml_value(value)}")
    return lines


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return toml_str(str(value))


def draft(
    sample: Sample,
    broker: BrokerConfig,
    hosts: list[HostDraft],
    source: str | None,
    ssh_config: str,
    proposals: Iterable[str] = (),
) -> str:
    """The hosts.toml draft (see the module docstring); `proposals`: the commented
    `[[inventory]]` tables (inventory_tables) before the checks'."""
    info = sample.info
    server = "valkey" if "valkey_version" in info else "redis"
    version = info.get("valkey_version") or info.get("redis_version") or "?"
    unix = sum(1 for c in sample.clients if c.host == "unix")
    replicas = [c for c in sample.clients if "S" in c.flags or "M" in c.flags]
    lines = [
        "# hosts.toml draft by `fleetcheck config discover`: read it, fill in every TODO,",
        "# then run `fleetcheck config check`. TODO values fail that check on purpose.",
        f"# broker: {comment(server)} {comment(str(version))}, {len(sample.clients)} clients "
        f"(ours left out), {len(hosts)} hosts guessed from {len(sample.clients) - unix} "
        "TCP clients",
    ]
    if unix:
        lines.append(f"# {unix} clients over the unix socket: the broker's own machine")
    if replicas:
        lines.append(f"# {len(replicas)} replica/master links left out of the hosts")
    if source:
        lines.append(f"# addresses already claimed by {comment(source)} are marked CLAIMED")
    lines += ["", *broker_table(broker), ""]
    for h in hosts:
        block = _host_block(h, ssh_config)
        if h.half_open and not h.claimed:
            lines.append(
                f"# LOOKS HALF-OPEN: all {h.connections} connections idle for over "
                f"{HALF_OPEN_IDLE // 60}m and none waiting in a command: the machine may be gone"
            )
            lines.append("# (left commented out; uncomment once you know it is alive)")
        elif h.claimed:
            claims = ", ".join(f"{a} (host {n!r})" for a, n in h.claimed.items())
            lines.append(f"# CLAIMED: {comment(claims)} already in {comment(source or '')}")
            lines.append("# (left commented out; uncomment only if that entry is wrong)")
        if h.half_open or h.claimed:
            block = ["# " + line if line else "#" for line in block]
        lines += block + [""]
    lines += list(proposals)
    lines += _check_tables(sample)
    return "\n".join(lines).rstrip("\n") + "\n"


def _host_block(h: HostDraft, ssh_config: str) -> list[str]:
    names = ", ".join(h.client_names[:5]) + (" ..." if len(h.client_names) > 5 else "")
    named = f": {comment(names)}" if h.named_from == "client names" else ""
    entry = "Host entry" if h.ssh else "no Host entry for it"
    return [
        "[[hosts]]",
        f"name = {toml_str(h.name)}  # from {h.named_from}{named}",
        f"ssh = {toml_str(h.ssh or h.addrs[0])}  # {entry} in {comment(ssh_config)}",
        f"addrs = [{', '.join(toml_str(a) for a in h.addrs)}]",
        f"min_clients = {h.connections}  # connections now: {h.connections}",
        f'tz = "{TODO}"  # TODO: the zone its logs are written in (IANA name, or "auto")',
        f'# logs = [{{ path = "{TODO}", max_age = "10m" }}]  # TODO: its worker logs',
    ]


def _check_tables(sample: Sample) -> list[str]:
    """Each check's own draft (`Check.discover_draft`), then the keys seen, those no draft
    proposed marked."""
    from fleetcheck.core import registry

    lines: list[str] = []
    proposed: set[str] = set()
    for check in registry.available().values():
        part = check.discover_draft(sample)
        if part is not None:
            lines += [*part.lines, ""]
            proposed.update(part.keys)
    scanned = f"{sample.scanned} keys scanned" + ("" if sample.complete else " (limit reached)")
    if sample.db_keys is not None:
        scanned += f" of {sample.db_keys}"
    lines.append(f"# {scanned}; hashes and lists seen:")
    for k in sorted(sample.keys, key=lambda k: (k.type, k.key))[:40]:
        mark = "" if k.key in proposed else "  (not proposed)"
        lines.append(f"#   {k.type:<4} {comment(k.key)}  size {k.size}{mark}")
    if len(sample.keys) > 40:
        lines.append(f"#   ... and {len(sample.keys) - 40} more")
    return lines


def broker_for_url(url: str, fleet: FleetConfig | None) -> BrokerConfig:
    """The broker at `url` (--url), reached with the config's own credentials unless the URL
    carries its own. Raises InvalidValue for a bad URL."""
    broker = BrokerConfig(url=url)
    if fleet is None:
        return broker
    from urllib.parse import urlsplit

    parts = urlsplit(broker.url or "")
    own = fleet.broker
    changes: dict[str, Any] = {}
    if parts.password is None:
        changes.update(password_env=own.password_env, password_file=own.password_file)
    if parts.username is None and own.username is not None:
        changes["username"] = own.username
    return replace(broker, **changes) if changes else broker


def public_url(url: str) -> str:
    """The broker URL without its password (a draft gets shared; use password_env)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{hostport}" if user else hostport))


def write_draft(path: Any, text: str, force: bool) -> None:
    """Write the draft; never replace a file unless `force` (FileExistsError). The new file
    appears whole or not at all."""
    from pathlib import Path

    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    try:
        if force:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails with FileExistsError instead of replacing
    finally:
        tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------- inventories it sees
def ansible_addresses(path: str, seconds: float) -> dict[str, str]:
    """{address: host name} of the Ansible inventory at `path`, read as an `ansible` source
    within `seconds`. Raises SourceFailed (one line) when it cannot be read; a host with no IP
    address is left out."""
    from fleetcheck.config.inventory import InventorySpec
    from fleetcheck.config.inventory_sources import read_source

    spec = InventorySpec("ansible", path=path, timeout=min(600.0, max(1.0, seconds)))
    found, _problems = read_source(spec, "")
    out: dict[str, str] = {}
    for f in found:
        for a in [*f.addrs, str(f.keys.get("ssh", ""))]:
            ip = normalise_ip(a)
            try:  # a DNS name is not looked up: discover asks no resolver
                ipaddress.ip_address(ip)
            except ValueError:
                continue
            out.setdefault(ip, f.name)
    return out


def named_by_inventory(
    hosts: list[HostDraft], names: dict[str, str], label: str
) -> tuple[list[HostDraft], int]:
    """The drafts with the inventory's host name for every draft an address of which the
    inventory knows (the inventory names machines better than client names guess them; a
    draft claimed by the current config keeps its name), and how many were renamed."""
    out, renamed = [], 0
    for h in hosts:
        name = next((names[a] for a in h.addrs if a in names), None)
        if name is None or h.claimed:
            out.append(h)
            continue
        renamed += 1
        out.append(replace(h, name=name, named_from=label))
    return out, renamed


def _common_glob(aliases: list[str]) -> str | None:
    """`worker-*` for worker-1, worker-2 (None when they share no prefix of 2 or more)."""
    if len(aliases) < 2:
        return None
    prefix = os.path.commonprefix(aliases)
    return f"{prefix}*" if len(prefix) >= 2 else None


def inventory_tables(
    hosts: list[HostDraft], ssh_config: str, ansible: str | None, ansible_hosts: int
) -> list[str]:
    """`[[inventory]]` tables the draft proposes, commented out (a source can bring hosts the
    broker never saw: the operator decides): the Ansible inventory whose addresses matched
    `ansible_hosts` drafts, and the ssh_config whose Host entries name drafts."""
    lines: list[str] = []
    if ansible and ansible_hosts:
        lines += [
            f"# PROPOSED: {ansible_hosts} of these hosts are in the Ansible inventory "
            f"{comment(ansible)} (named from it): that inventory can be the fleet's source",
            "# [[inventory]]",
            '# source = "ansible"',
            f"# path = {toml_str(ansible)}",
            "",
        ]
    aliases = sorted(h.ssh for h in hosts if h.ssh)
    if aliases:
        shown = ", ".join(aliases[:5]) + (" ..." if len(aliases) > 5 else "")
        lines += [
            f"# PROPOSED: {len(aliases)} of these hosts have Host entries in "
            f"{comment(ssh_config)} ({comment(shown)}): its Host entries can be the fleet's source",
            "# [[inventory]]",
            '# source = "ssh_config"',
        ]
        if os.path.expanduser(ssh_config) != os.path.expanduser("~/.ssh/config"):
            lines.append(f"# path = {toml_str(ssh_config)}")
        glob_ = _common_glob(aliases)
        if glob_:
            lines.append(f"# match = {toml_str(glob_)}")
        lines.append("")
    return lines
