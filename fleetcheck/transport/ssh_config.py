"""ssh_config read the way OpenSSH's `ssh -F FILE` reads it, for the keywords fleets use.

Our own reader because paramiko.SSHConfig ignores `Include`, lets a later value win and knows
no `Match user/localuser/originalhost`. The rules are OpenSSH 9's (readconf.c), checked
against the real `ssh -G` over a corpus of configs: the FIRST value of a keyword wins
(IdentityFile accumulates); the caller's `user`/`port` act like ssh's command line; a Match
criterion we do not implement is refused with a clear error, never guessed. Files are
tokenised once per change (inode, size, mtime); resolution is pure."""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import os
import pwd
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from fleetcheck.transport.filecache import ParsedFiles

MAX_INCLUDE_DEPTH = 16
DEFAULT_IDENTITY_FILES = (
    "~/.ssh/id_rsa",
    "~/.ssh/id_ecdsa",
    "~/.ssh/id_ecdsa_sk",
    "~/.ssh/id_ed25519",
    "~/.ssh/id_ed25519_sk",
    "~/.ssh/id_xmss",
    "~/.ssh/id_dsa",
)
DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
_STRICT = {"yes": "true", "true": "true", "no": "false", "false": "false", "off": "false"}


class SshConfigError(ValueError):
    """A config line we cannot honour; the message names the file and line."""


@dataclass(frozen=True)
class Line:
    keyword: str  # lower case
    args: tuple[str, ...]
    file: str
    lineno: int

    @property
    def where(self) -> str:
        return f"{self.file} line {self.lineno}"


@dataclass(frozen=True)
class Resolved:
    """What ssh would use for one host argument (like `ssh -G`), tokens not yet expanded in
    `identity_files_raw` (as `ssh -G` prints them) and expanded everywhere else."""

    host: str  # the argument as given (ssh -G's `host`)
    hostname: str
    user: str
    port: int
    identity_files_raw: tuple[str, ...]  # as written (ssh -G shows them so)
    identity_files: tuple[str, ...]  # tokens and ~ expanded
    identity_files_set: bool  # False: OpenSSH's default list
    identities_only: bool
    proxy_jump: str | None  # raw, e.g. "j1,alice@j2:2222"
    proxy_command: str | None
    connect_timeout: float | None
    host_key_alias: str | None
    user_known_hosts: tuple[str, ...]  # expanded
    user_known_hosts_set: bool
    global_known_hosts: tuple[str, ...]
    strict_host_key_checking: str  # true, false, ask, accept-new
    user_set: bool = False  # by the command line or the file (not the local default)
    port_set: bool = False
    sources: tuple[str, ...] = field(default=(), compare=False)  # files read

    @property
    def jumps(self) -> tuple[str, ...]:
        if not self.proxy_jump or self.proxy_jump.lower() == "none":
            return ()
        return tuple(j.strip() for j in self.proxy_jump.split(",") if j.strip())


def _local_user() -> tuple[str, str, int]:
    pw = pwd.getpwuid(os.getuid())
    return pw.pw_name, pw.pw_dir, pw.pw_uid


def expand_tilde(path: str, home: str) -> str:
    if path == "~" or path.startswith("~/"):
        return home + path[1:]
    if path.startswith("~"):
        name, _, rest = path[1:].partition("/")
        try:
            return pwd.getpwnam(name).pw_dir + ("/" + rest if rest else "")
        except KeyError:
            return path
    return path


def percent_expand(text: str, tokens: dict[str, str], where: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(text):
            raise SshConfigError(f"{where}: invalid trailing % in {text!r}")
        t = text[i + 1]
        if t == "%":
            out.append("%")
        elif t in tokens:
            out.append(tokens[t])
        else:
            raise SshConfigError(f"{where}: unknown token %{t} in {text!r}")
        i += 2
    return "".join(out)


def split_args(text: str, where: str) -> list[str]:
    """OpenSSH's argv_split: whitespace-separated words, '' and "" quotes, backslash escapes
    of quotes/backslash/space, and a word starting with # ends the line (a comment)."""
    args: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            break
        if text[i] == "#":
            break
        word: list[str] = []
        quote: str | None = None
        while i < n:
            c = text[i]
            if quote is None and c in " \t\r\n":
                break
            if (
                c == "\\"
                and i + 1 < n
                and text[i + 1] in "\\'\" "
                and (quote is None or text[i + 1] in ("\\", quote))
            ):
                word.append(text[i + 1])
                i += 2
                continue
            if quote is None and c in "'\"":
                quote = c
            elif quote is not None and c == quote:
                quote = None
            else:
                word.append(c)
            i += 1
        if quote is not None:
            raise SshConfigError(f"{where}: unterminated quote")
        args.append("".join(word))
    return args


def tokenize(path: str) -> list[Line]:
    """One file's lines as (keyword, args); `Keyword=value` and `Keyword = value` accepted."""
    lines: list[Line] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, raw in enumerate(f, 1):
            text = raw.strip()
            if not text or text.startswith("#"):
                continue
            # the keyword ends at whitespace or '='
            k = 0
            while k < len(text) and text[k] not in " \t=":
                k += 1
            keyword = text[:k].lower()
            rest = text[k:].lstrip(" \t")
            if rest.startswith("="):
                rest = rest[1:].lstrip(" \t")
            where = f"{path} line {lineno}"
            lines.append(Line(keyword, tuple(split_args(rest, where)), path, lineno))
    return lines


_cache: ParsedFiles[list[Line]] = ParsedFiles(tokenize)


def _match_pattern(s: str, pattern: str) -> bool:
    """OpenSSH's match_pattern: only * and ? are special."""
    return fnmatch.fnmatchcase(s, pattern.replace("[", "[[]"))


def match_pattern_list(s: str, patterns: str, lower: bool) -> bool:
    """OpenSSH's match_pattern_list: comma-separated, a matching !pattern vetoes."""
    if lower:
        s = s.lower()
    hit = False
    for p in patterns.split(","):
        if lower:
            p = p.lower()
        if p.startswith("!"):
            if _match_pattern(s, p[1:]):
                return False
        elif _match_pattern(s, p):
            hit = True
    return hit


class _State:
    """Options as readconf.c keeps them: None until first set."""

    def __init__(self, user: str | None, port: int | None) -> None:
        self.values: dict[str, object] = {}
        if user is not None:
            self.values["user"] = user
        if port is not None:
            self.values["port"] = port
        self.identity_files: list[str] = []
        self.sources: list[str] = []
        self.exec_cache: dict[str, bool] = {}

    def first(self, key: str, value: object) -> None:
        self.values.setdefault(key, value)


class Resolver:
    """Resolves host arguments against one config file (as `ssh -F FILE`)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.local_user, self.home, self.uid = _local_user()
        self._host_fqdn: str | None = None

    # ------------------------------------------------------------ tokens
    def _local_host(self) -> tuple[str, str]:
        if self._host_fqdn is None:
            self._host_fqdn = socket.gethostname()  # no DNS: what `hostname` says
        return self._host_fqdn, self._host_fqdn.split(".")[0]

    def tokens(self, hostname: str, user: str, port: int, original: str, alias: str | None) -> dict:
        long_host, short_host = self._local_host()
        c = hashlib.sha1(f"{long_host}{hostname}{port}{user}".encode()).hexdigest()
        return {
            "C": c,
            "d": self.home,
            "h": hostname,
            "i": str(self.uid),
            "k": alias or hostname,
            "L": short_host,
            "l": long_host,
            "n": original,
            "p": str(port),
            "r": user,
            "u": self.local_user,
        }

    # ------------------------------------------------------------ reading
    def resolve(self, host: str, user: str | None = None, port: int | None = None) -> Resolved:
        """`host` as ssh's argument; `user`/`port` as its `-l`/`-p` (they win)."""
        state = _State(user, port)
        if self.path is not None:
            lines = _cache.get(self.path)
            if lines is not None:
                state.sources.append(self.path)
                active = [True]
                self._read(lines, host, state, active, never=False, depth=0)
        return self._finish(host, state)

    def _read(
        self, lines: list[Line], host: str, st: _State, active: list[bool], never: bool, depth: int
    ) -> None:
        if depth > MAX_INCLUDE_DEPTH:
            raise SshConfigError(f"{lines[0].file if lines else '?'}: too many nested Includes")
        active[0] = not never
        for line in lines:
            kw, args = line.keyword, line.args
            if kw == "host":
                value = False
                for pattern in args:
                    if pattern.startswith("!"):
                        if _match_pattern(host, pattern[1:]):
                            value = False
                            break
                    elif _match_pattern(host, pattern):
                        value = True
                active[0] = value and not never
                continue
            if kw == "match":
                value = self._match(line, host, st)
                active[0] = value and not never
                continue
            if kw == "include":
                self._include(line, host, st, active, never, depth)
                continue
            if active[0]:
                self._option(line, st)

    def _include(
        self, line: Line, host: str, st: _State, active: list[bool], never: bool, depth: int
    ) -> None:
        if not line.args:
            raise SshConfigError(f"{line.where}: Include without a file")
        was_active = active[0]
        for arg in line.args:
            if arg.startswith(("/", "~")):
                pattern = expand_tilde(arg, self.home)
            else:
                pattern = f"{self.home}/.ssh/{arg}"
            for path in sorted(glob.glob(pattern)):
                lines = _cache.get(path)
                if lines is None:
                    continue
                st.sources.append(path)
                try:
                    self._read(lines, host, st, active, not was_active or never, depth + 1)
                finally:
                    active[0] = was_active  # a Match in the include does not leak out

    def _match(self, line: Line, host: str, st: _State) -> bool:
        args = list(line.args)
        if not args:
            raise SshConfigError(f"{line.where}: Match without criteria")
        result = True
        i = 0
        hostname = st.values.get("hostname")
        if isinstance(hostname, str):
            match_host = percent_expand(hostname, {"h": host}, line.where)
        else:
            match_host = host
        ruser = str(st.values.get("user", self.local_user))
        while i < len(args):
            raw = args[i]
            i += 1
            negate = raw.startswith("!")
            crit = raw[1:].lower() if negate else raw.lower()
            if crit == "all":
                if len(args) > 1 and not all(a.lower() in ("all",) for a in args):
                    raise SshConfigError(f"{line.where}: Match all must stand alone")
                return not negate
            if crit in ("canonical", "final"):
                raise SshConfigError(
                    f"{line.where}: Match {crit} is not supported by fleetcheck (it needs "
                    "hostname canonicalisation); use Host or Match host"
                )
            if i >= len(args):
                raise SshConfigError(f"{line.where}: Match {crit} needs an argument")
            arg = args[i]
            i += 1
            if crit == "host":
                ok = match_pattern_list(match_host, arg, lower=True)
            elif crit == "originalhost":
                ok = match_pattern_list(host, arg, lower=True)
            elif crit == "user":
                ok = match_pattern_list(ruser, arg, lower=False)
            elif crit == "localuser":
                ok = match_pattern_list(self.local_user, arg, lower=False)
            elif crit == "exec":
                if not result:
                    continue  # OpenSSH skips exec once the line cannot match
                port = int(st.values.get("port", 22))  # type: ignore[call-overload]
                cmd = percent_expand(
                    arg,
                    self.tokens(match_host, ruser, port, host, None),
                    line.where,
                )
                if cmd not in st.exec_cache:
                    try:
                        rc = subprocess.run(
                            ["/bin/sh", "-c", cmd],
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            timeout=10,
                        ).returncode
                    except subprocess.TimeoutExpired:
                        rc = 1
                    st.exec_cache[cmd] = rc == 0
                ok = st.exec_cache[cmd]
            else:
                raise SshConfigError(
                    f"{line.where}: Match {crit} is not supported by fleetcheck "
                    "(supported: all, host, originalhost, user, localuser, exec)"
                )
            if ok == negate:
                result = False
        return result

    def _option(self, line: Line, st: _State) -> None:
        kw, args = line.keyword, line.args

        def one() -> str:
            if not args:
                raise SshConfigError(f"{line.where}: {kw} needs a value")
            return args[0]

        if kw == "hostname":
            st.first("hostname", one())
        elif kw == "user":
            st.first("user", one())
        elif kw == "port":
            v = one()
            if not v.isdigit() or not 0 < int(v) < 65536:
                raise SshConfigError(f"{line.where}: Port {v!r} is not a port number")
            st.first("port", int(v))
        elif kw == "identityfile":
            st.identity_files.append(one())
        elif kw == "identitiesonly":
            st.first("identitiesonly", _yes_no(one(), line))
        elif kw == "proxyjump":
            v = one()
            if "proxyjump" not in st.values and "proxycommand" not in st.values:
                st.values["proxyjump"] = v
        elif kw == "proxycommand":
            text = " ".join(args)
            if not text:
                raise SshConfigError(f"{line.where}: ProxyCommand needs a value")
            jump = st.values.get("proxyjump")
            if "proxycommand" not in st.values and (jump is None or jump == "none"):
                st.values["proxycommand"] = text
        elif kw == "connecttimeout":
            v = one()
            if v.lower() == "none":
                st.first("connecttimeout", None)
            else:
                from fleetcheck.parse.duration import parse_duration

                try:
                    st.first("connecttimeout", float(parse_duration(v)))
                except ValueError:
                    raise SshConfigError(
                        f"{line.where}: ConnectTimeout {v!r} is not a time"
                    ) from None
        elif kw == "hostkeyalias":
            st.first("hostkeyalias", one())
        elif kw == "userknownhostsfile":
            one()
            st.first("userknownhostsfile", args)
        elif kw == "globalknownhostsfile":
            one()
            st.first("globalknownhostsfile", args)
        elif kw == "stricthostkeychecking":
            v = one().lower()
            if v not in ("yes", "no", "ask", "accept-new", "off", "true", "false"):
                raise SshConfigError(f"{line.where}: StrictHostKeyChecking {v!r} is not valid")
            st.first("stricthostkeychecking", _STRICT.get(v, v))
        # every other keyword is ssh's business, not ours: ignored

    # ------------------------------------------------------------ the result
    def _finish(self, host: str, st: _State) -> Resolved:
        v = st.values
        raw_hostname = v.get("hostname")
        where = self.path or "ssh config"
        if isinstance(raw_hostname, str):
            hostname = percent_expand(raw_hostname, {"h": host}, f"{where}: HostName")
        else:
            hostname = host
        hostname = hostname.lower()
        user = str(v.get("user", self.local_user))
        port = int(v.get("port", 22))  # type: ignore[call-overload]
        alias = v.get("hostkeyalias")
        alias_s = alias if isinstance(alias, str) else None
        tokens = self.tokens(hostname, user, port, host, alias_s)
        raw_ids = tuple(st.identity_files) or DEFAULT_IDENTITY_FILES
        ids = tuple(
            expand_tilde(percent_expand(p, tokens, f"{where}: IdentityFile"), self.home)
            for p in raw_ids
            if p.lower() != "none"
        )
        ukh_raw = v.get("userknownhostsfile")
        ukh_list = list(ukh_raw) if isinstance(ukh_raw, list | tuple) else []
        ukh = tuple(
            expand_tilde(percent_expand(p, tokens, f"{where}: UserKnownHostsFile"), self.home)
            for p in (ukh_list or DEFAULT_USER_KNOWN_HOSTS)
        )
        gkh_raw = v.get("globalknownhostsfile")
        gkh = tuple(gkh_raw) if isinstance(gkh_raw, list | tuple) else DEFAULT_GLOBAL_KNOWN_HOSTS
        jump = v.get("proxyjump")
        command = v.get("proxycommand")
        timeout = v.get("connecttimeout")
        return Resolved(
            host=host,
            hostname=hostname,
            user=user,
            port=port,
            identity_files_raw=raw_ids,
            identity_files=ids,
            identity_files_set=bool(st.identity_files),
            identities_only=bool(v.get("identitiesonly", False)),
            proxy_jump=jump if isinstance(jump, str) and jump.lower() != "none" else None,
            proxy_command=(
                command if isinstance(command, str) and command.lower() != "none" else None
            ),
            connect_timeout=float(timeout) if isinstance(timeout, int | float) else None,
            host_key_alias=alias_s,
            user_known_hosts=ukh,
            user_known_hosts_set=bool(ukh_list),
            global_known_hosts=tuple(gkh),
            strict_host_key_checking=str(v.get("stricthostkeychecking", "ask")),
            user_set="user" in v,
            port_set="port" in v,
            sources=tuple(st.sources),
        )


def _yes_no(v: str, line: Line) -> bool:
    low = v.lower()
    if low in ("yes", "true"):
        return True
    if low in ("no", "false"):
        return False
    raise SshConfigError(f"{line.where}: expected yes or no, got {v!r}")


def resolver(path: str | None) -> Resolver:
    """A resolver for `path` (~ expanded; "none" or a missing file: no config)."""
    if path is None or path.lower() == "none":
        return Resolver(None)
    return Resolver(str(Path(path).expanduser()))
