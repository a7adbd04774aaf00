"""Reading each `[[inventory]]` source into `Found` hosts: `read_source` does the I/O, the
parsers are pure. ansible: inventory_ansible; ssh_config: every `Host` alias without a
pattern, Includes followed as the SSH transport reads them; command: JSON on stdout,
fleetcheck's host schema or Prometheus file_sd; tailscale: `tailscale status --json`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import fleetcheck.config.inventory as inv
from fleetcheck.config.inventory import Found, InventorySpec, SourceFailed, host_name_problem
from fleetcheck.config.inventory_ansible import (
    ANSIBLE_ENV,
    ansible_argv,
    declared_lines,
    from_ansible,
    ip_of,
)
from fleetcheck.config.inventory_programs import load_json, read_file, run_program

# ---------------------------------------------------------------- command


def from_command_json(data: Any, label: str) -> tuple[list[Found], list[str]]:
    """fleetcheck's host schema (`{"hosts": [{"name": ..., "ssh": ..., ...}]}` or the bare
    list) or Prometheus file_sd (each target's host is a host, its port the exporter's, not
    SSH's; labels `groups`/`group`/`job` are groups, `fleetcheck_KEY` labels host keys)."""
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
        keys.update(inv.var_keys(str(name), variables, problems, label))
        addrs = [a for a in (ip_of(str(x)) for x in item.get("addrs", []) or []) if a]
        if isinstance(keys.get("ssh"), str):
            addr = ip_of(keys["ssh"])
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
        if isinstance(g, str) and inv.group_name(g) is not None:
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
            keys.update(inv.var_keys(host, labels, problems, label))
            addr = ip_of(host)
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
        ips = [a for a in (ip_of(str(x)) for x in peer.get("TailscaleIPs") or []) if a]
        if not ips:
            problems.append(f"{label}: peer {name}: no Tailscale address; left out")
            continue
        ipv4 = [a for a in ips if ":" not in a]
        tags = [str(t).removeprefix("tag:") for t in peer.get("Tags") or [] if isinstance(t, str)]
        groups = _groups(tags, label, name, problems)
        variables = {"online": online, "os": peer.get("OS"), "dns_name": dns or None}
        found.append(Found(name, {"ssh": (ipv4 or ips)[0]}, groups, ips, variables, label))
    return found, problems


def tailscale_argv(spec: InventorySpec) -> list[str]:
    return [spec.program or "tailscale", "status", "--json"]


# ---------------------------------------------------------------- ssh_config


def from_ssh_config(
    spec: InventorySpec, config_file: str, until: float | None
) -> tuple[list[Found], list[str]]:
    """Every `Host` alias without a pattern of the file and its Includes, resolved as `ssh -G`
    would. In [ssh] config_file a host's `ssh` is its alias (the patrol resolves it the same
    way); from another file its resolved HostName, User, Port, key and jump are written out."""
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
        addr = ip_of(r.hostname)
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
