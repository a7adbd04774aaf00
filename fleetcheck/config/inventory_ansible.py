"""The Ansible inventory source: `ansible-inventory -i PATH --list` (Ansible's own parser) or
its saved output, turned into `Found` hosts (pure): ansible_host/port/user/
ssh_private_key_file, jump hosts in ansible_ssh_common_args, each host's line for its origin."""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
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

LOCAL_CONNECTIONS = ("local",)
SSH_CONNECTIONS = ("ssh", "smart", "paramiko", "paramiko_ssh", "ansible.builtin.ssh")


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


def _members(data: dict[str, Any], kind: str) -> list[tuple[str, str]]:
    """(group, member) for each string in each group's `kind` list ("hosts", "children")."""
    out = []
    for gname, body in data.items():
        members = body.get(kind, []) if gname != "_meta" and isinstance(body, dict) else []
        out += (
            [(gname, m) for m in members if isinstance(m, str)] if isinstance(members, list) else []
        )
    return out


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
    parents: dict[str, list[str]] = {}
    for gname, child in _members(data, "children"):
        parents.setdefault(child, []).append(gname)
    direct: dict[str, list[str]] = {}
    order: list[str] = []
    for gname, h in _members(data, "hosts"):
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
        addr = ip_of(address)
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


def ip_of(text: str) -> str | None:
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
    """(the jump chain as ssh -J takes it, or None; why the arguments cannot be used, or None).
    -J, -o ProxyJump= and a `ProxyCommand="ssh -W %h:%p HOST"` are jumps; any other option that
    would change where or how fleetcheck connects is refused rather than ignored."""
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
