"""Reading each `[[inventory]]` source: running its program (bounded, its stderr kept for the
reason) and turning its output into `Found` hosts. The parsers (`from_ansible`,
`from_command_json`, `from_tailscale`) are pure and table-tested; `read_source` does the I/O.

- ansible: `ansible-inventory -i PATH --list` (Ansible's own parser: INI, YAML, ranges,
  children, group_vars/host_vars, plugins), or its saved output; ansible_host / ansible_port /
  ansible_user / ansible_ssh_private_key_file and jump hosts in ansible_ssh_common_args
  (`-J`, `-o ProxyJump=`, `-o ProxyCommand="ssh -W %h:%p ..."`).
- ssh_config: every `Host` alias without a pattern, Includes followed as the SSH transport
  reads them; each host's `ssh` is its alias, so it resolves exactly as `ssh -G` would.
- command: JSON on stdout, fleetcheck's host schema or Prometheus file_sd.
- tailscale: `tailscale status --json`, peers with their tags as groups.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fleetcheck.config.inventory import (
    Found,
    InventorySpec,
    SourceFailed,
    group_name,
    host_name_problem,
    var_keys,
)

MAX_OUTPUT = 64 * 1024 * 1024  # an inventory's JSON beyond this is not an inventory
LOCAL_CONNECTIONS = ("local",)
SSH_CONNECTIONS = ("ssh", "smart", "paramiko", "paramiko_ssh", "ansible.builtin.ssh")


# ---------------------------------------------------------------- running a program


def find_program(name: str) -> str | None:
    """`name` in PATH, else beside this Python (a venv's bin: ansible-core installed there)."""
    if "/" in name:
        return name if os.access(name, os.X_OK) else None
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if os.access(beside, os.X_OK) else None


def run_program(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> bytes:
    """Run argv in its own session; its stdout, or SourceFailed naming the exit status and
    the last line of its stderr. At the timeout the whole process group is killed."""
    exe = find_program(argv[0])
    if exe is None:
        raise SourceFailed(f"{argv[0]}: not found (not in PATH)")
    try:
        proc = subprocess.Popen(
            [exe, *argv[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    except OSError as e:
        raise SourceFailed(f"{argv[0]}: cannot run: {e.strerror or e}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        from fleetcheck.parse.duration import format_duration

        raise SourceFailed(
            f"{argv[0]}: no answer within {format_duration(timeout)} (killed)"
        ) from None
    finally:
        if proc.poll() is None:
            _kill_group(proc)
    if proc.returncode != 0:
        raise SourceFailed(f"{argv[0]}: exited {proc.returncode}{stderr_tail(err)}")
    if len(out) > MAX_OUTPUT:
        raise SourceFailed(f"{argv[0]}: more than {MAX_OUTPUT // (1024 * 1024)} MB of output")
    return out


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, ValueError):
        pass


def stderr_tail(err: bytes) -> str:
    """': LAST MEANINGFUL LINE' of a program's stderr (or nothing)."""
    lines = [ln.strip() for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if "ERROR" in ln or "rror" in ln]
    line = (errors or lines or [""])[-1]
    return f": {line[:300]}" if line else " (nothing on stderr)"


def load_json(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SourceFailed(f"{what}: output is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise SourceFailed(
            f"{what}: not JSON (line {e.lineno}, column {e.colno}: {e.msg})"
        ) from None


def read_file(path: str, what: str) -> bytes:
    p = Path(path).expanduser()
    try:
        if p.stat().st_size > MAX_OUTPUT:
            raise SourceFailed(f"{path}: larger than {MAX_OUTPUT // (1024 * 1024)} MB")
        return p.read_bytes()
    except OSError as e:
        raise SourceFailed(f"{what} {path}: cannot read: {e.strerror or e}") from None


# ---------------------------------------------------------------- ansible


def ansible_argv(spec: InventorySpec) -> list[str]:
    return [spec.program or "ansible-inventory", "-i", str(spec.path), "--list"]


ANSIBLE_ENV = {
    # a source Ansible cannot parse is an error, not a warning and an empty inventory
    "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
    "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "True",
    "ANSIBLE_NOCOLOR": "1",
    "ANSIBLE_DEPRECATION_WARNINGS": "False",
    "ANSIBLE_RETRY_FILES_ENABLED": "False",
}


def _parents(groups: dict[str, Any]) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = {}
    for gname, body in groups.items():
        if gname == "_meta" or not isinstance(body, dict):
            continue
        children = body.get("children", [])
        for child in children if isinstance(children, list) else []:
            if isinstance(child, str):
                parents.setdefault(child, []).append(gname)
    return parents


def from_ansible(data: Any, label: str) -> tuple[list[Found], list[str]]:
    """Hosts of `ansible-inventory --list` JSON: each host's groups (its own first, then
    their parents, nearest first; never `all` or `ungrouped`) and its variables mapped to
    how to reach it. A host that cannot be used is left out with a line saying why."""
    if not isinstance(data, dict):
        raise SourceFailed(f"{label}: not ansible-inventory --list output (not an object)")
    meta = data.get("_meta", {})
    hostvars = meta.get("hostvars", {}) if isinstance(meta, dict) else {}
    if not isinstance(hostvars, dict):
        raise SourceFailed(f"{label}: _meta.hostvars is not an object")
    parents = _parents(data)
    direct: dict[str, list[str]] = {}
    order: list[str] = []
    for gname, body in data.items():
        if gname == "_meta" or not isinstance(body, dict):
            continue
        hosts = body.get("hosts", [])
        for h in hosts if isinstance(hosts, list) else []:
            if isinstance(h, str):
                if h not in direct:
                    order.append(h)
                direct.setdefault(h, []).append(gname)
    for h in hostvars:
        if h not in direct:
            order.append(h)
            direct[h] = []
    problems: list[str] = []
    found: list[Found] = []
    skipped_groups: set[str] = set()
    for name in order:
        groups: list[str] = []
        frontier = sorted(direct[name])
        while frontier:
            nxt: list[str] = []
            for g in frontier:
                if g in groups or g in ("all", "ungrouped"):
                    continue
                if group_name(g) is None:
                    if g not in skipped_groups:
                        skipped_groups.add(g)
                        problems.append(
                            f"{label}: group {g!r}: not a group name fleetcheck "
                            "can use; its hosts are kept without it"
                        )
                    continue
                groups.append(g)
                nxt += sorted(parents.get(g, []))
            frontier = nxt
        variables = hostvars.get(name, {})
        if not isinstance(variables, dict):
            variables = {}
        host = ansible_host(name, variables, label, problems)
        if host is not None:
            host.groups = groups
            found.append(host)
    return found, problems


def _var(variables: dict[str, Any], *names: str) -> tuple[str, Any] | None:
    for n in names:
        if n in variables and variables[n] is not None and variables[n] != "":
            return n, variables[n]
    return None


def ansible_host(
    name: str, variables: dict[str, Any], label: str, problems: list[str]
) -> Found | None:
    """One Ansible host as fleetcheck reaches it, or None (with a line in `problems`)."""
    problem = host_name_problem(name)
    if problem:
        problems.append(f"{label}: host {name!r}: {problem}; left out")
        return None

    def refuse(why: str) -> None:
        problems.append(f"{label}: host {name}: {why}; left out")

    keys: dict[str, Any] = {}
    conn = _var(variables, "ansible_connection")
    if conn is not None:
        kind = str(conn[1])
        if kind in LOCAL_CONNECTIONS:
            keys["ssh"] = "local"
        elif kind not in SSH_CONNECTIONS:
            refuse(f"ansible_connection={kind}: fleetcheck reaches hosts over SSH only")
            return None
    addrs: list[str] = []
    if "ssh" not in keys:
        target = _var(variables, "ansible_host", "ansible_ssh_host")
        address = str(target[1]) if target is not None else name
        if target is not None and (not address.strip() or any(c.isspace() for c in address)):
            refuse(f"{target[0]}={address!r}: not a host name or address")
            return None
        keys["ssh"] = address
        addr = _ip(address)
        if addr is not None:
            addrs.append(addr)
    port = _var(variables, "ansible_port", "ansible_ssh_port")
    if port is not None and keys["ssh"] != "local":
        value = port[1]
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
            refuse(f"{port[0]}={port[1]!r}: not a port number (1-65535)")
            return None
        keys["port"] = value
    user = _var(variables, "ansible_user", "ansible_ssh_user")
    if user is not None:
        keys["user"] = str(user[1])
    key = _var(variables, "ansible_ssh_private_key_file", "ansible_private_key_file")
    if key is not None:
        keys["identity_file"] = str(key[1])
    for var in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        args = _var(variables, var)
        if args is None:
            continue
        jump, why = jump_from_ssh_args(str(args[1]))
        if why is not None:
            refuse(f"{var}: {why}")
            return None
        if jump is not None:
            keys["proxy_jump"] = jump
    keys.update(var_keys(name, variables, problems, label))
    return Found(name=name, keys=keys, addrs=addrs, vars=variables, origin=label)


def _ip(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        return None


IGNORED_OPTIONS = {  # options that change nothing about where fleetcheck connects
    "stricthostkeychecking", "userknownhostsfile", "controlmaster", "controlpath",
    "controlpersist", "serveraliveinterval", "serveralivecountmax", "connecttimeout",
    "loglevel", "forwardagent", "identitiesonly", "compression", "preferredauthentications",
    "pubkeyauthentication", "passwordauthentication", "gssapiauthentication",
}  # fmt: skip


def jump_from_ssh_args(text: str) -> tuple[str | None, str | None]:
    """(the jump chain as ssh -J takes it, or None; why the arguments cannot be used, or
    None). -J / -o ProxyJump= are taken as they are; `-o ProxyCommand="ssh -W %h:%p
    [-q] [-p PORT] [-l USER] [-i KEY] [USER@]HOST"` is the same as a one-hop jump; a
    ProxyCommand of another shape cannot be carried out, and an option that would change
    where or how fleetcheck connects is refused rather than ignored."""
    try:
        words = shlex.split(text)
    except ValueError as e:
        return None, f"cannot be split like a shell line ({e})"
    jump: str | None = None
    i = 0
    while i < len(words):
        w = words[i]
        if w == "-J" or w.startswith("-J"):
            value = w[2:] or (words[i + 1] if i + 1 < len(words) else "")
            i += 1 if w[2:] else 2
            if not value:
                return None, "-J without a jump host"
            jump = value
            continue
        if w == "-o" or w.startswith("-o"):
            opt = w[2:] or (words[i + 1] if i + 1 < len(words) else "")
            i += 1 if w[2:] else 2
            m = re.match(r"\s*([A-Za-z]+)\s*(?:=|\s)\s*(.*)", opt, re.S)
            key, value = (m.group(1), m.group(2)) if m else (opt, "")
            k = key.strip().lower()
            if k == "proxyjump":
                jump = value.strip()
            elif k == "proxycommand":
                hop = jump_from_proxy_command(value.strip())
                if hop is None:
                    return None, (
                        f"ProxyCommand {value.strip()!r} is not `ssh -W %h:%p HOST`: "
                        "fleetcheck cannot carry it out (write ProxyJump instead)"
                    )
                jump = hop
            elif k not in IGNORED_OPTIONS:
                return None, f"-o {key.strip()}: changes how to connect; not represented"
            continue
        if w in ("-q", "-v", "-C", "-A", "-T", "-x"):
            i += 1
            continue
        return None, f"{w!r}: an ssh argument fleetcheck cannot represent"
    return jump, None


def jump_from_proxy_command(cmd: str) -> str | None:
    """`ssh [-q] [-p P] [-l U] -W %h:%p [U@]HOST` as ProxyJump's `[U@]HOST[:P]`, else None."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return None
    if not words or os.path.basename(words[0]) != "ssh":
        return None
    port = user = host = None
    forward = False
    i = 1
    while i < len(words):
        w = words[i]
        if w in ("-W",) and i + 1 < len(words):
            forward = words[i + 1] in ("%h:%p", "[%h]:%p")
            i += 2
        elif w == "-p" and i + 1 < len(words):
            port = words[i + 1]
            i += 2
        elif w == "-l" and i + 1 < len(words):
            user = words[i + 1]
            i += 2
        elif w in ("-q", "-v", "-C", "-A", "-T"):
            i += 1
        elif w.startswith("-"):
            return None
        elif host is None:
            host = w
            i += 1
        else:
            return None
    if not forward or host is None or (port is not None and not port.isdigit()):
        return None
    if user and "@" not in host:
        host = f"{user}@{host}"
    return host + (f":{port}" if port else "")


RANGE = re.compile(r"\[([0-9]+|[a-z]):([0-9]+|[a-z])(?::[0-9]+)?\]")


def _pattern(token: str) -> re.Pattern[str] | None:
    """An inventory host token (`web-[01:03].example`) as a regex over the names it makes."""
    parts = RANGE.split(token)
    if len(parts) == 1:
        return None
    rx = ""
    for i, part in enumerate(parts):
        rx += re.escape(part) if i % 3 == 0 else ("" if i % 3 == 2 else "([0-9]+|[a-z])")
    return re.compile(rx + "$")


def declared_lines(path: str, names: list[str], limit: int = 200) -> dict[str, str]:
    """{host: "FILE line N"}: where an INI or YAML inventory (a file, or the files of a
    directory, host_vars and group_vars left out) first writes each host, itself or in a
    range (`node-[001:300]`). Only for `config check`'s "from"; a host not found is left out."""
    root = Path(path).expanduser()
    files = (
        [root]
        if root.is_file()
        else sorted(
            p
            for p in root.rglob("*")
            if p.is_file() and not {"host_vars", "group_vars"} & set(p.parts)
        )[:limit]
    )
    wanted = set(names)
    out: dict[str, str] = {}
    for f in files:
        try:
            if f.stat().st_size > 8 * 1024 * 1024:
                continue
            lines = f.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for n, line in enumerate(lines, 1):
            text = line.strip()
            if not text or text[0] in "#;[":
                continue
            token = text.split()[0].rstrip(":")
            hits = {token} & wanted
            rx = _pattern(token)
            if rx is not None:
                hits = {h for h in wanted if rx.match(h)}
            for h in hits:
                out.setdefault(h, f"{f} line {n}")
            wanted -= hits
        if not wanted:
            break
    return out


# ---------------------------------------------------------------- command


def from_command_json(data: Any, label: str) -> tuple[list[Found], list[str]]:
    """fleetcheck's host schema (`{"hosts": [{"name": ..., "ssh": ..., ...}]}` or the bare
    list; any [[hosts]] key, plus `addrs` and `vars`) or Prometheus file_sd
    (`[{"targets": ["HOST:PORT", ...], "labels": {...}}]`: each target's host is a host, its
    port is the exporter's and not SSH's; labels `groups`/`group`/`job` are groups,
    `fleetcheck_KEY` labels host keys)."""
    problems: list[str] = []
    if isinstance(data, dict) and isinstance(data.get("hosts"), list):
        items = data["hosts"]
    elif isinstance(data, list):
        items = data
    else:
        raise SourceFailed(
            f"{label}: JSON neither fleetcheck's host list nor file_sd (a list of "
            '{"targets": [...], "labels": {...}})'
        )
    if items and all(isinstance(i, dict) and "targets" in i for i in items):
        return _from_file_sd(items, label, problems), problems
    found: list[Found] = []
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(f"{label}: hosts[{n}]: not an object; left out")
            continue
        name = item.get("name")
        problem = host_name_problem(name)
        if problem:
            problems.append(f"{label}: hosts[{n}]: {problem}; left out")
            continue
        keys = {k: v for k, v in item.items() if k not in ("name", "groups", "vars", "addrs")}
        groups = _groups(item.get("groups", []), label, str(name), problems)
        raw_vars = item.get("vars")
        variables: dict[str, Any] = raw_vars if isinstance(raw_vars, dict) else {}
        keys.update(var_keys(str(name), variables, problems, label))
        addrs = [a for a in (_ip(str(x)) for x in item.get("addrs", []) or []) if a]
        if isinstance(keys.get("ssh"), str):
            addr = _ip(keys["ssh"])
            if addr and addr not in addrs:
                addrs.append(addr)
        found.append(Found(str(name), keys, groups, addrs, variables, label))
    return found, problems


def _groups(raw: Any, label: str, name: str, problems: list[str]) -> list[str]:
    if isinstance(raw, str):
        raw = [g.strip() for g in raw.split(",") if g.strip()]
    if not isinstance(raw, list):
        problems.append(f"{label}: host {name}: groups: not a list; ignored")
        return []
    out = []
    for g in raw:
        if isinstance(g, str) and group_name(g) is not None:
            out.append(g)
        else:
            problems.append(f"{label}: host {name}: group {g!r}: not a group name; ignored")
    return out


def _from_file_sd(items: list[Any], label: str, problems: list[str]) -> list[Found]:
    found: dict[str, Found] = {}
    for n, item in enumerate(items):
        labels = item.get("labels") or {}
        targets = item.get("targets")
        if not isinstance(targets, list) or not isinstance(labels, dict):
            problems.append(f"{label}: [{n}]: targets must be a list, labels an object")
            continue
        groups: list[str] = []
        for key in ("groups", "group", "job"):
            if key in labels:
                groups += [g for g in _groups(labels[key], label, f"[{n}]", problems)
                           if g not in groups]  # fmt: skip
        for t in targets:
            host = _target_host(t)
            problem = host_name_problem(host) if host else "an empty target"
            if problem:
                problems.append(f"{label}: [{n}] target {t!r}: {problem}; left out")
                continue
            assert host is not None
            keys = {"ssh": host}
            keys.update(var_keys(host, labels, problems, label))
            addr = _ip(host)
            have = found.get(host)
            if have is None:
                found[host] = Found(host, keys, list(groups), [addr] if addr else [],
                                    dict(labels), label)  # fmt: skip
            else:
                have.keys.update(keys)
                have.groups += [g for g in groups if g not in have.groups]
    return list(found.values())


def _target_host(target: Any) -> str | None:
    """file_sd's "HOST:PORT" (or "[V6]:PORT", or a bare host) as the host."""
    if not isinstance(target, str) or not target.strip():
        return None
    t = target.strip()
    if t.startswith("["):
        return t[1:].partition("]")[0] or None
    if t.count(":") == 1:
        return t.partition(":")[0] or None
    return t


# ---------------------------------------------------------------- tailscale


def from_tailscale(
    data: Any, label: str, include_self: bool = False, online_only: bool = False
) -> tuple[list[Found], list[str]]:
    """Peers of `tailscale status --json`: named by their MagicDNS name's first label (unique
    in a tailnet; else HostName), reached at their first Tailscale address, their tags
    (`tag:worker`) as groups (`worker`); `online` among their variables."""
    if not isinstance(data, dict) or not isinstance(data.get("Peer", {}), dict):
        raise SourceFailed(f"{label}: not `tailscale status --json` output")
    problems: list[str] = []
    peers: list[Any] = list((data.get("Peer") or {}).values())
    if include_self and isinstance(data.get("Self"), dict):
        peers.insert(0, data["Self"])
    found: list[Found] = []
    for peer in peers:
        if not isinstance(peer, dict):
            continue
        dns = str(peer.get("DNSName") or "").rstrip(".")
        name = dns.split(".")[0] if dns else str(peer.get("HostName") or "")
        problem = host_name_problem(name)
        if problem:
            problems.append(f"{label}: peer {name!r}: {problem}; left out")
            continue
        online = bool(peer.get("Online"))
        if online_only and not online:
            continue
        ips = [a for a in (_ip(str(x)) for x in peer.get("TailscaleIPs") or []) if a]
        if not ips:
            problems.append(f"{label}: peer {name}: no Tailscale address; left out")
            continue
        ipv4 = [a for a in ips if ":" not in a]
        tags = peer.get("Tags") or []
        groups = _groups(
            [str(t).removeprefix("tag:") for t in tags if isinstance(t, str)],
            label,
            name,
            problems,
        )
        variables = {"online": online, "os": peer.get("OS"), "dns_name": dns or None}
        found.append(Found(name, {"ssh": (ipv4 or ips)[0]}, groups, ips, variables, label))
    return found, problems


def tailscale_argv(spec: InventorySpec) -> list[str]:
    return [spec.program or "tailscale", "status", "--json"]


# ---------------------------------------------------------------- ssh_config


def from_ssh_config(
    spec: InventorySpec, config_file: str, until: float | None
) -> tuple[list[Found], list[str]]:
    """Every `Host` alias without a pattern (`*`, `?`, `!`) of the file and its Includes (as
    the transport follows them), each resolved as `ssh -G` resolves it. When the file is the
    one [ssh] config_file names, a host's `ssh` is its alias (the patrol resolves it the same
    way); for another file its resolved HostName, User, Port, key and jump are written out."""
    from fleetcheck.transport.ssh_config import Resolver, SshConfigError

    label = spec.label
    path = str(Path(spec.path or config_file).expanduser())
    same = Path(path).resolve() == Path(config_file).expanduser().resolve()
    if not os.path.isfile(path):
        raise SourceFailed(f"{label}: {path}: no such file")
    if not os.access(path, os.R_OK):
        raise SourceFailed(f"{label}: {path}: cannot read (permission denied)")
    res = Resolver(path)
    res.until = until
    problems: list[str] = []
    aliases = ssh_config_aliases(res, path, problems, label)
    found: list[Found] = []
    for alias, where in aliases:
        problem = host_name_problem(alias)
        if problem:
            problems.append(f"{where}: Host {alias}: {problem}; left out")
            continue
        try:
            r = res.resolve(alias)
        except (SshConfigError, OSError, ValueError) as e:
            problems.append(f"{where}: Host {alias}: cannot resolve: {e}; left out")
            continue
        keys: dict[str, Any]
        if same:
            keys = {"ssh": alias}
        else:
            keys = {"ssh": r.hostname, "port": r.port, "user": r.user}
            if r.identity_files_set and r.identity_files:
                keys["identity_file"] = r.identity_files[0]
            if r.jumps:
                keys["proxy_jump"] = ",".join(r.jumps)
        addr = _ip(r.hostname)
        found.append(Found(alias, keys, [], [addr] if addr else [], {}, f"{label} ({where})"))
    return found, problems


def ssh_config_aliases(
    res: Any, main: str, problems: list[str], label: str
) -> list[tuple[str, str]]:
    """(alias, FILE:LINE) of every pattern-free `Host` alias, in the order ssh reads the
    files: an Include is read where it stands, its relative paths under ~/.ssh/, its glob
    sorted (fleetcheck.transport.ssh_config.Resolver._include's rule)."""
    import glob

    from fleetcheck.transport.ssh_config import expand_tilde, tokenize

    home = res.env.get("HOME") or res.home
    out: list[tuple[str, str]] = []
    seen: set[str] = set()

    def walk(path: str, depth: int) -> None:
        if depth > 16:
            problems.append(f"{label}: {path}: Includes nested more than 16 deep; not read")
            return
        try:
            lines = tokenize(path)
        except OSError as e:
            problems.append(f"{label}: {path}: cannot read: {e.strerror or e}")
            return
        for line in lines:
            if line.keyword == "host":
                for a in line.args:
                    if a and not any(ch in a for ch in "*?!") and a not in seen:
                        seen.add(a)
                        out.append((a, line.where))
            elif line.keyword == "include":
                for arg in line.args:
                    if not arg:
                        continue
                    if not arg.startswith(("/", "~")):
                        arg = f"~/.ssh/{arg}"
                    try:
                        pattern = expand_tilde(arg, home, line.where)
                    except ValueError:
                        continue
                    for p in sorted(glob.glob(pattern)):
                        if os.path.isfile(p):
                            walk(p, depth + 1)

    walk(main, 0)
    return out


# ---------------------------------------------------------------- one source


def read_source(spec: InventorySpec, ssh_config_file: str) -> tuple[list[Found], list[str]]:
    """The hosts one source reports now (before `match`), or SourceFailed."""
    label = spec.label
    if spec.source == "ansible":
        if spec.saved is not None:
            data = load_json(read_file(spec.saved, label), label)
        else:
            path = Path(str(spec.path)).expanduser()
            if not path.exists():
                raise SourceFailed(f"{label}: {spec.path}: no such file or directory")
            if not os.access(path, os.R_OK):
                raise SourceFailed(f"{label}: {spec.path}: cannot read (permission denied)")
            raw = run_program(ansible_argv(spec), spec.timeout, ANSIBLE_ENV)
            found, problems = from_ansible(load_json(raw, label), label)
            lines = declared_lines(str(spec.path), [h.name for h in found])
            for h in found:
                where = lines.get(h.name)
                if where is not None:
                    short = where.removeprefix(f"{Path(str(spec.path)).expanduser()} ")
                    h.origin = f"{label} ({short})"
            return found, problems
        return from_ansible(data, label)
    if spec.source == "command":
        return from_command_json(load_json(run_program(list(spec.run), spec.timeout), label), label)
    if spec.source == "tailscale":
        if spec.saved is not None:
            raw = read_file(spec.saved, label)
        else:
            raw = run_program(tailscale_argv(spec), spec.timeout)
        return from_tailscale(load_json(raw, label), label, spec.include_self, spec.online_only)
    until = time.monotonic() + spec.timeout
    return from_ssh_config(spec, ssh_config_file, until)
