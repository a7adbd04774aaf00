"""rater_probe's I/O with the broker and the ack host: the push sent once, where the envelope
is, the watch of the connections that could take it, taking it back, and the acknowledgement."""

from __future__ import annotations

import fnmatch
import time
from shlex import quote
from typing import Any

from fleetcheck.checks.rater_probe import RaterProbeConfig
from fleetcheck.checks.rater_probe.facts import (
    LIST_POPS,
    LOG_TAIL_BYTES,
    RETURN_MIN_S,
    LoopFacts,
    follow,
)

from fleetcheck.config import HostConfig
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.errors import CheckError
from fleetcheck.core.hostfacts import logs_of
from fleetcheck.parse.clientlist import Client, parse_client_list
from fleetcheck.parse.duration import format_duration


def push(
    r: Any, command: str, config: RaterProbeConfig, envelope: bytes, watch: bool = True
) -> tuple[Any, Exception | None, tuple[Client, ...] | None]:
    """The push, sent exactly once on a connection of the probe's client (never its retry),
    in one MULTI with CLIENT ID and CLIENT LIST when `watch`: the connections as they are at
    the very moment of the push (who was waiting in a pop), in the same round trip.
    (reply, None, clients but our own or None) when it landed; (False, error, None) when the
    broker refused the push (nothing written); (None, error, None) when its fate is unknown;
    (None, None, None) when the MULTI was refused as a whole (CLIENT not permitted to this
    user): nothing was written, the caller pushes again without `watch`."""
    import redis

    listing = [("CLIENT", "ID"), ("CLIENT", "LIST")] if watch else []
    commands = [("MULTI",), *listing, (command, config.inbox, envelope), ("EXEC",)]
    pool = r.connection_pool
    conn = pool.get_connection()  # connecting may retry: nothing is sent yet
    try:
        conn.send_packed_command(conn.pack_commands(commands))
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(conn.read_response())
            except redis.ResponseError as e:
                replies.append(e)
    except Exception as e:
        conn.disconnect()
        return None, e, None
    finally:
        pool.release(conn)
    if isinstance(replies[0], Exception):  # MULTI refused: the push ran on its own
        result = [replies[-2]]
    elif isinstance(replies[-2], Exception):  # the push refused (EXECABORT): not written
        return False, replies[-2], None
    elif isinstance(replies[-1], Exception) or not isinstance(replies[-1], list):
        return None, None, None  # EXECABORT for CLIENT: nothing was written
    else:
        result = replies[-1]
    if isinstance(result[-1], Exception):
        return False, result[-1], None
    if len(result) != 3 or any(isinstance(x, Exception) for x in result):
        return result[-1], None, None
    own, listing_raw, pushed = result
    try:
        clients = parse_client_list(listing_raw)
    except Exception:
        return pushed, None, None
    return pushed, None, tuple(c for c in clients if c.id != int(own))


def candidates(before: tuple[Client, ...] | None, pattern: str) -> tuple[bool, tuple[Client, ...]]:
    """The connections that could take the envelope: those named `client_name` when any
    is connected (the user said which they are), else every connection waiting in a
    list pop at the push (the broker does not say on which key)."""
    if not before:
        return False, ()
    named = tuple(c for c in before if fnmatch.fnmatchcase(c.name, pattern))
    if named:
        return True, named
    return False, tuple(c for c in before if c.blocked and c.cmd in LIST_POPS)


def look(r: Any, watch: tuple[Client, ...], list_id: bool) -> tuple[Client, ...] | None:
    """The watched connections as they are now (None: unreadable)."""
    ids = [c.id for c in watch if c.id is not None]
    try:
        if list_id:
            raw = r.execute_command("CLIENT", "LIST", "ID", *ids)
        else:
            raw = r.execute_command("CLIENT", "LIST")
        wanted = set(ids)
        return tuple(c for c in parse_client_list(raw) if c.id in wanted)
    except Exception:
        return None


def watch_return(
    r: Any,
    before: tuple[Client, ...] | None,
    by_name: bool,
    watch: tuple[Client, ...],
    looks: list[tuple[float, float, tuple[Client, ...]]],
    list_id: bool,
    take_early: float,
    take_late: float,
    deadline: float,
) -> LoopFacts:
    """Watch the connections that could have taken the envelope until each is back in
    its loop (or cannot have been the taker), or the deadline: the probe's own, but at
    least RETURN_MIN_S after the take. Looks come quick then slower (2 ms doubling to
    100 ms): a healthy loop is settled in one or two round trips. The take happened
    between `take_early` (ours last seen) and `take_late` (first seen gone)."""
    if before is None:
        return LoopFacts(seen=False, by_name=False)
    if not watch:
        return LoopFacts(seen=True, by_name=by_name)

    def rebased(t: float, seen: tuple[Client, ...]) -> tuple[float, float, tuple[Client, ...]]:
        return (t - take_late, t - take_early, seen)

    timeline = [rebased(t, seen) for t, _, seen in looks]
    end = max(deadline, take_late + RETURN_MIN_S)
    pause = 0.002
    while True:
        seen = look(r, watch, list_id)
        now = time.perf_counter()
        if seen is not None:
            timeline.append(rebased(now, seen))
        states = [follow(c, timeline) for c in watch]
        if not any(w.state == "stuck" for w in states) or now >= end:
            break
        time.sleep(min(pause, max(0.0, end - now)))
        pause = min(pause * 2, 0.1)
    others = 0
    if by_name:
        ids = {c.id for c in watch}
        others = sum(1 for c in before if c.blocked and c.cmd in LIST_POPS and c.id not in ids)
    return LoopFacts(
        seen=True,
        by_name=by_name,
        others_waiting=others,
        watched=tuple(states),
        window_s=round(max(0.0, time.perf_counter() - take_late), 3),
    )


def position(
    r: Any, inbox: str, envelope: bytes, window: int, from_head: bool, has_lpos: bool
) -> int | None:
    """Where our envelope is, counted from the consumer's end; None once it is gone.

    Only the first `window` elements from the consumer's end are searched: ours cannot be
    further away than where it was last seen, so each look stays short on the server.
    """
    if has_lpos:
        if from_head:
            pos = r.execute_command("LPOS", inbox, envelope, "RANK", 1, "MAXLEN", window)
            return None if pos is None else int(pos)
        pipe = r.pipeline(transaction=False)
        pipe.execute_command("LPOS", inbox, envelope, "RANK", -1, "MAXLEN", window)
        pipe.llen(inbox)
        pos, length = pipe.execute()
        return None if pos is None else max(0, int(length) - 1 - int(pos))
    if from_head:
        items = r.lrange(inbox, 0, window - 1)
    else:
        items = list(reversed(r.lrange(inbox, -window, -1)))
    try:
        return items.index(envelope)
    except ValueError:
        return None


def take_back(r: Any, inbox: str, envelope: bytes) -> tuple[int, int | None]:
    """LREM every copy of our (unique) envelope: (removed, inbox length afterwards; None:
    the inbox could not be read)."""
    try:
        pipe = r.pipeline(transaction=False)
        pipe.lrem(inbox, 0, envelope)
        pipe.llen(inbox)
        removed, length = pipe.execute()
        return int(removed), int(length)
    except Exception:
        return 0, None


def ack_host(ctx: PatrolContext, config: RaterProbeConfig) -> HostConfig | None:
    if config.ack != "log":
        return None
    try:
        h = ctx.fleet.host(config.ack_host or "")
    except KeyError:
        raise CheckError(
            f"ack_host {config.ack_host!r} is not a host in {ctx.fleet.path}: nothing pushed"
        ) from None
    if h.ssh is None:
        raise CheckError(f"ack_host {h.name} has no ssh, so its log cannot be read")
    if not (config.ack_log or any(log.path for log in logs_of(h))):
        raise CheckError(f"ack_host {h.name} has no log files; set ack_log to the rater's log")
    return h


def raters(r: Any, pattern: str) -> tuple[Client, ...] | None:
    """The connections named `pattern` as they are now (None: CLIENT LIST unreadable)."""
    try:
        clients = parse_client_list(r.execute_command("CLIENT", "LIST"))
    except Exception:
        return None
    return tuple(c for c in clients if fnmatch.fnmatchcase(c.name, pattern))


def await_ack(
    ctx: PatrolContext,
    config: RaterProbeConfig,
    probe_id: str,
    host: HostConfig | None,
    deadline: float,
    has_lpos: bool,
) -> tuple[bool | None, str]:
    assert config.ack is not None
    if config.ack == "log":
        assert host is not None
        return await_log(ctx, config, probe_id, host, deadline)
    key = config.ack.split(":", 1)[1]
    r = ctx.probe_broker()
    ident = probe_id.encode()
    try:
        while True:
            if position(r, key, ident, 1000, True, has_lpos) is not None:
                # the reply was for us: leave the list as it was
                r.lrem(key, 1, ident)  # type: ignore[arg-type]  # bytes are fine on the wire
                return True, f"id pushed to {key}"
            if time.perf_counter() >= deadline:
                return False, f"id not pushed to {key} within {format_duration(config.timeout)}"
            time.sleep(0.002)
    except Exception as e:
        return None, f"reply list {key} unreadable: {ctx.broker_error(e).reason}"


def await_log(
    ctx: PatrolContext,
    config: RaterProbeConfig,
    probe_id: str,
    host: HostConfig,
    deadline: float,
) -> tuple[bool | None, str]:
    path = config.ack_log or next(log.path for log in logs_of(host) if log.path)
    wait = max(0.0, deadline - time.perf_counter())
    # one exec that polls on the host (every exec costs the host a login shell)
    script = (
        f"f={quote(path)}; id={quote(probe_id)}; n={int(wait * 10) + 1}\n"
        '[ -r "$f" ] || { echo "unreadable"; exit 3; }\n'
        "while :; do\n"
        f'  tail -c {LOG_TAIL_BYTES} "$f" | grep -F -q -- "$id" && {{ echo found; exit 0; }}\n'
        '  n=$((n - 1)); [ "$n" -le 0 ] && exit 1\n'
        "  sleep 0.1\n"
        "done"
    )
    try:
        result = ctx.shell(host).run(script, wait + 5.0, 4096)
    except CheckError as e:
        return None, f"{host.name}: log not readable: {e.reason}"
    out = result.stdout.decode("utf-8", "replace")
    if "found" in out:
        return True, f"id logged in {host.name}:{path}"
    if "unreadable" in out:
        return None, f"{host.name}:{path} is not readable"
    if result.rc is None:
        return None, f"{host.name}: log search did not finish"
    return False, f"id not in {host.name}:{path} within {format_duration(config.timeout)}"
