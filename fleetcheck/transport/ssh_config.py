"""ssh_config read the way OpenSSH 9.2's `ssh -F FILE` reads it, for the keywords fleets use.

Our own reader because paramiko.SSHConfig ignores `Include`, lets a later value win and knows
no `Match user/localuser/originalhost`. The rules are OpenSSH's (readconf.c, ssh.c), checked
against the real `ssh -G` by tests/ssh_diff_config: every line of every file read is checked
as ssh checks it, applied or not (a line ssh refuses refuses the whole config, with the file
and line); the FIRST value of a keyword wins (IdentityFile accumulates); the caller's
`user`/`port` act like ssh's command line; `Match final`/`canonical` and CanonicalizeHostname
get ssh's second pass; what would need DNS (CanonicalDomains) is refused, never guessed.
Files are tokenised once per change (inode, size, mtime); resolution reads nothing else but
the Match exec commands it runs."""

from __future__ import annotations

import glob
import hashlib
import os
import pwd
import socket
import stat
from collections.abc import Mapping
from pathlib import Path

from fleetcheck.transport.filecache import ParsedFiles
from fleetcheck.transport.ssh_config_exec import match_exec
from fleetcheck.transport.ssh_config_expand import (
    canonical_address,
    expand_tilde,
    percent_expand,
)
from fleetcheck.transport.ssh_config_model import Line, Resolved, SshConfigError, check_permissions
from fleetcheck.transport.ssh_config_strict import CRYPTO_KEYWORDS, STRICTER, refusal, refuses
from fleetcheck.transport.ssh_config_syntax import (
    WHITESPACE,
    SyntaxRefusal,
    a2port,
    argv_split,
    check_args,
    convtime,
    is_keyword,
    match_pattern,
    match_pattern_list,
    parse_jump,
    strdelim,
)

MAX_INCLUDE_DEPTH = 16
MAX_IDENTITY_FILES = 100
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


def _local_user() -> tuple[str, str, int]:
    pw = pwd.getpwuid(os.getuid())
    return pw.pw_name, pw.pw_dir, pw.pw_uid


def tokenize(path: str) -> list[Line]:
    """One file's lines as (keyword, args). Lines end at LF only (getline); `Keyword=value`
    and `Keyword = value` accepted; a line ssh refuses outright keeps its reason in `error`."""
    lines: list[Line] = []
    with open(path, "rb") as f:
        data = f.read().decode("utf-8", errors="replace")
    for lineno, raw in enumerate(data.split("\n"), 1):
        text = raw.rstrip(WHITESPACE + "\f")
        if not text:
            continue
        keyword, rest = strdelim(text)
        if keyword == "":
            keyword, rest = strdelim(rest)
        if not keyword or keyword.startswith("#"):
            continue
        keyword = keyword.lower()
        rest = (rest or "").lstrip(WHITESPACE)
        if not rest:
            why = _NO_ARGUMENT.get(keyword, "")
            missing = f'no argument after keyword "{keyword}"{why}'
            lines.append(Line(keyword, (), path, lineno, "", missing))
            continue
        error: str | None = None
        try:
            args = tuple(argv_split(rest))
        except SyntaxRefusal:
            args, error = (), "unterminated quote (invalid quotes)"
        known = is_keyword(keyword)
        refusal = None
        if known and error is None:
            try:
                check_args(keyword, list(args))
                if keyword == "proxyjump":  # checked applied or not
                    parse_jump(rest.lstrip(WHITESPACE + "="))
            except SyntaxRefusal as e:
                refusal = str(e)
        lines.append(Line(keyword, args, path, lineno, rest, error, known, refusal))
    return lines


_NO_ARGUMENT = {"include": " (Include without a file)", "match": " (Match without criteria)"}
_cache: ParsedFiles[list[Line]] = ParsedFiles(tokenize)


class _State:
    """Options as readconf.c keeps them: None until first set."""

    def __init__(self, user: str | None, port: int | None) -> None:
        self.values: dict[str, object] = {}
        if user is not None:
            self.values["user"] = user
        if port is not None:
            self.values["port"] = port
        self.identity_files: list[str] = []
        self.where: dict[str, str] = {}  # where a value was set, for messages
        self.sources: list[str] = []
        self.want_final = False
        self.final = False
        self.final_host = ""

    def first(self, key: str, value: object) -> None:
        self.values.setdefault(key, value)


class Resolver:
    """Resolves host arguments against one config file (as `ssh -F FILE`).

    `home` and `env` default to the local user's and this process's; the differential
    tests give the real ssh and us the same private ones."""

    def __init__(
        self, path: str | None, home: str | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        self.path = path
        self.local_user, pw_home, self.uid = _local_user()
        self.home = home or pw_home
        self.env: Mapping[str, str] = os.environ if env is None else env
        self._host_fqdn: str | None = None
        # `Match exec` commands end by this time.monotonic() instant (None: EXEC_TIMEOUT each);
        # `cut` says one was ended by it, so the resolution it was part of is not ssh's
        self.until: float | None = None
        self.cut = False

    # ------------------------------------------------------------ tokens
    def _local_host(self) -> tuple[str, str]:
        if self._host_fqdn is None:
            self._host_fqdn = socket.gethostname()  # no DNS: what `hostname` says
        return self._host_fqdn, self._host_fqdn.split(".")[0]

    def tokens(self, hostname: str, user: str, port: int, original: str, alias: str) -> dict:
        """The tokens of ssh's DEFAULT_CLIENT_PERCENT_EXPAND_ARGS; `alias` is %k (the
        HostKeyAlias, else the host argument for files, the host name for Match exec)."""
        long_host, short_host = self._local_host()
        c = hashlib.sha1(f"{long_host}{hostname}{port}{user}".encode()).hexdigest()
        return {
            "C": c,
            "d": self.home,
            "h": hostname,
            "i": str(self.uid),
            "k": alias,
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
            self._read_main(host, state)
            if not state.want_final:
                canon = str(state.values.get("canonicalizehostname", "no"))
                state.want_final = canon != "no"
            if state.want_final:
                self._refuse_dns_canonicalisation(host, state)
                state.final = True
                state.final_host = self._hostname(host, state)
                state.values["hostname"] = state.final_host
                state.sources.clear()
                self._read_main(host, state)
        return self._finish(host, state)

    def _read_main(self, host: str, st: _State) -> None:
        lines = _cache.get(self.path) if self.path is not None else None
        if lines is None or self.path is None:
            return
        if os.path.isfile(self.path):  # `-F /dev/null` style: nothing anyone can write
            check_permissions(self.path, f"{self.path}")
        st.sources.append(self.path)
        self._read(lines, host, st, [True], never=False, depth=0)

    def _refuse_dns_canonicalisation(self, host: str, st: _State) -> None:
        """ssh.c resolve_canonicalize, without its lookups: where ssh would ask DNS for a
        name (a trailing dot, CanonicalDomains, CanonicalizePermittedCNAMEs) we refuse
        rather than guess its answer; where it would find nothing and fall back, so do we."""
        v = st.values
        canon = str(v.get("canonicalizehostname", "no"))
        name = self._hostname(host, st)
        if canon == "no" or canonical_address(name) is not None:
            return
        direct = v.get("proxycommand") in (None, "none") and "proxyjump" not in v
        if not direct and canon != "always":
            return  # ssh leaves names for a proxy or jump host alone
        where = v.get("canonicalizehostname_where", self.path)
        domains = list(v.get("canonicaldomains") or ())  # type: ignore[call-overload]
        domains = (
            domains[: [d.lower() for d in domains].index("none")]
            if any(d.lower() == "none" for d in domains)
            else domains
        )
        ndots = name.count(".")
        needs_dns = (
            name.endswith(".")
            or (ndots <= int(v.get("canonicalizemaxdots", 1)) and bool(domains))  # type: ignore[call-overload]
            or bool(v.get("canonicalizepermittedcnames"))
        )
        if needs_dns:
            raise SshConfigError(
                f"{where}: CanonicalizeHostname {canon} with CanonicalDomains/"
                "CanonicalizePermittedCNAMEs (or a name ending in a dot) is not supported by "
                "fleetcheck (it needs DNS lookups while reading the config); write the full "
                "names in HostName instead"
            )
        if ndots <= int(v.get("canonicalizemaxdots", 1)) and not v.get(  # type: ignore[call-overload]
            "canonicalizefallbacklocal", True
        ):
            raise SshConfigError(
                f"{where}: Could not resolve host {name!r} (CanonicalizeHostname {canon}, "
                "no CanonicalDomains and CanonicalizeFallbackLocal no: ssh stops here too)"
            )

    def _hostname(self, host: str, st: _State) -> str:
        """ssh.c: HostName with %h expanded, lower-cased unless it is an address, which is
        put in its numeric form (no lookup)."""
        raw = st.values.get("hostname")
        name = host
        if isinstance(raw, str):
            name = raw if st.final else percent_expand(raw, {"h": host}, f"{self.path}: HostName")
        address = canonical_address(name)
        return address if address is not None else name.lower()

    def _read(
        self, lines: list[Line], host: str, st: _State, active: list[bool], never: bool, depth: int
    ) -> None:
        active[0] = not never
        name = st.final_host if st.final else host  # what Host patterns are matched against
        for line in lines:
            kw = line.keyword
            if (line.error or line.refusal or not line.known) and self._ignored(line, st):
                continue
            if kw == "host":  # inlined: the hot path of a big config
                if "" in line.args:
                    raise SshConfigError(f"{line.where}: keyword host empty argument")
                value = False
                if not never:
                    for pattern in line.args:
                        if pattern[:1] == "!":
                            if match_pattern(name, pattern[1:]):
                                value = False
                                break
                        elif not value and match_pattern(name, pattern):
                            value = True
                active[0] = value
            elif kw == "match":
                value = self._match(line, host, st)
                active[0] = value and not never
            elif kw == "include":
                self._include(line, host, st, active, never, depth)
            elif active[0]:
                self._option(line, st)
            elif kw in ("identityagent", "forwardagent"):
                self._check_env(line)  # what ssh checks even where the line does not apply

    @staticmethod
    def _ignored(line: Line, st: _State) -> bool:
        """A line ssh refuses raises here, in ssh's order; True: an IgnoreUnknown keyword."""
        if line.error and line.error.startswith("no argument"):
            raise SshConfigError(f"{line.where}: {line.error}")
        if not line.known:
            ignored = st.values.get("ignoreunknown")
            if isinstance(ignored, str) and match_pattern_list(line.keyword, ignored, lower=True):
                return True
            raise SshConfigError(f"{line.where}: Bad configuration option: {line.keyword}")
        raise SshConfigError(f"{line.where}: {line.error or line.refusal}")

    def _include(
        self, line: Line, host: str, st: _State, active: list[bool], never: bool, depth: int
    ) -> None:
        was_active = active[0]
        home = self.env.get("HOME") or self.home  # glob(GLOB_TILDE) uses $HOME
        for arg in line.args:
            if arg == "":
                raise SshConfigError(f"{line.where}: keyword include empty argument")
            if not arg.startswith(("/", "~")):
                arg = f"~/.ssh/{arg}"
            pattern = expand_tilde(arg, home, line.where)
            for path in sorted(glob.glob(pattern)):
                if depth + 1 > MAX_INCLUDE_DEPTH:
                    raise SshConfigError(
                        f"{line.where}: too many nested Includes (Include {path}: "
                        f"more than {MAX_INCLUDE_DEPTH} deep, a loop?)"
                    )
                st_file = check_permissions(path, line.where)
                if st_file is not None and stat.S_ISDIR(st_file.st_mode):
                    continue  # ssh reads nothing from it
                try:
                    lines = _cache.get(path)
                except OSError as e:
                    raise SshConfigError(f"{line.where}: cannot read {path}: {e}") from None
                if lines is None:
                    continue  # a dangling link: glob(3) finds nothing either
                st.sources.append(path)
                try:
                    self._read(lines, host, st, active, not was_active or never, depth + 1)
                finally:
                    active[0] = was_active  # a Match in the include does not leak out

    def _match(self, line: Line, host: str, st: _State) -> bool:
        """readconf.c match_cfg_line: criteria read with strdelim (double quotes only), all
        evaluated (exec skipped once the line cannot match), `all` alone or after one."""
        if st.final:
            match_host = st.final_host
        else:
            raw = st.values.get("hostname")
            match_host = (
                percent_expand(raw, {"h": host}, line.where) if isinstance(raw, str) else host
            )
        ruser = str(st.values.get("user", self.local_user))
        result = True
        attributes = 0
        cp: str | None = line.rest
        bad = f"{line.where}: Bad Match condition"
        while True:
            attrib, cp = strdelim(cp)
            if attrib is None or attrib == "":
                break
            if attrib.startswith("#"):
                cp = None
                break
            negate = attrib.startswith("!")
            crit = (attrib[1:] if negate else attrib).lower()
            if crit == "all":
                arg, after = strdelim(cp)
                if attributes > 1 or (arg is not None and arg != "" and not arg.startswith("#")):
                    raise SshConfigError(f"{bad}: '{attrib}' cannot be combined with others")
                cp = None if arg is not None and arg.startswith("#") else after
                if result:
                    result = not negate
                break
            attributes += 1
            if crit in ("canonical", "final"):
                if crit == "final":
                    st.want_final = True
                if st.final == negate:
                    result = False
                continue
            arg, cp = strdelim(cp)
            if arg is None or arg == "" or arg.startswith("#"):
                raise SshConfigError(f"{bad}: Match {crit} needs an argument")
            if crit == "host":  # match_hostname: both sides lower-cased
                ok = match_pattern_list(match_host.lower(), arg, lower=True)
            elif crit == "originalhost":
                ok = match_pattern_list(host.lower(), arg, lower=True)
            elif crit == "user":
                ok = match_pattern_list(ruser, arg, lower=False)
            elif crit == "localuser":
                ok = match_pattern_list(self.local_user, arg, lower=False)
            elif crit == "exec":
                port = int(st.values.get("port", 22))  # type: ignore[call-overload]
                alias = st.values.get("hostkeyalias")
                tokens = self.tokens(
                    match_host, ruser, port, host, alias if isinstance(alias, str) else match_host
                )
                cmd = percent_expand(arg, tokens, line.where)
                if not result:
                    continue  # ssh skips exec once the line cannot match
                ok = self._exec(cmd)
            else:
                raise SshConfigError(
                    f"{bad}: Match {crit} is not supported (OpenSSH 9.2 has all, canonical, "
                    "final, exec, host, originalhost, user, localuser)"
                )
            if ok == negate:
                result = False
        if attributes == 0 and not (
            line.rest.split() and line.rest.split()[0].lower() in ("all", "!all")
        ):
            raise SshConfigError(f"{bad}: Match without criteria")
        if cp:
            raise SshConfigError(f"{line.where}: keyword match extra arguments at end of line")
        return result

    def _exec(self, cmd: str) -> bool:
        matched, cut = match_exec(cmd, self.env, self.until)
        self.cut = self.cut or cut
        return matched

    def _check_env(self, line: Line) -> None:
        arg = line.args[0] if line.args else ""
        if line.keyword == "forwardagent" and arg.lower() in ("yes", "no", "true", "false"):
            return
        try:
            percent_expand(arg.replace("%", "%%"), {}, "", self.env)
        except SshConfigError as e:
            raise SshConfigError(
                f"{line.where}: Invalid environment expansion {arg}: {e}"
            ) from None

    def _option(self, line: Line, st: _State) -> None:
        kw, args = line.keyword, line.args
        one = args[0] if args else ""
        if kw in ("hostname", "user", "hostkeyalias", "ignoreunknown"):
            st.first(kw, one)
        elif kw == "port":
            st.first("port", a2port(one))
        elif kw in ("identityfile", "identityfile2"):
            if len(st.identity_files) >= MAX_IDENTITY_FILES:
                raise SshConfigError(f"{line.where}: Too many identity files specified")
            if one not in st.identity_files:
                st.identity_files.append(one)
                st.where[f"identityfile {one}"] = line.where
        elif kw == "identitiesonly":
            st.first("identitiesonly", one.lower() in ("yes", "true"))
        elif kw == "proxyjump":
            try:
                jump = parse_jump(line.rest.lstrip(WHITESPACE + "="))
            except SyntaxRefusal as e:
                raise SshConfigError(f"{line.where}: {e}") from None
            if "proxyjump" not in st.values and "proxycommand" not in st.values:
                st.values["proxyjump"] = jump
        elif kw == "proxycommand":
            text = line.rest.lstrip(WHITESPACE + "=")
            set_jump = st.values.get("proxyjump")
            if "proxycommand" not in st.values and set_jump in (None, "none"):
                st.values["proxycommand"] = text
                if text.lower() != "none":  # ssh expands only these when it connects
                    tokens = dict.fromkeys("hknpr", "")
                    percent_expand(text, tokens, f"{line.where}: ProxyCommand")
        elif kw in ("connecttimeout", "serveraliveinterval"):
            st.first(kw, None if one == "none" else convtime(one))
        elif kw in ("serveralivecountmax", "canonicalizemaxdots"):
            st.first(kw, int(one))
        elif kw == "canonicalizefallbacklocal":
            st.first(kw, one.lower() in ("yes", "true"))
        elif kw in ("userknownhostsfile", "globalknownhostsfile", "canonicaldomains",
                    "canonicalizepermittedcnames"):  # fmt: skip
            if kw not in st.values:
                st.where[kw] = line.where
            st.first(kw, list(args))
        elif kw == "stricthostkeychecking":
            v = one.lower()
            st.first(kw, _STRICT.get(v, v))
        elif kw == "canonicalizehostname":
            v = one.lower()
            if kw not in st.values:
                st.values["canonicalizehostname_where"] = line.where
            st.first(kw, {"true": "yes", "false": "no"}.get(v, v))
        elif kw in ("identityagent", "forwardagent"):
            self._check_env(line)
        elif kw in STRICTER:  # first value wins; refused in _finish if it can refuse
            st.first(f"stricter {kw}", (line.where, list(args)))
        elif kw in CRYPTO_KEYWORDS:  # applied by the handshake (transport.ssh.crypto)
            st.first(f"crypto {kw}", (line.where, one))
        # every other keyword cannot make ssh refuse: checked by check_args, then ignored

    # ------------------------------------------------------------ the result
    def _finish(self, host: str, st: _State) -> Resolved:
        v = st.values
        where = self.path or "ssh config"
        for kw in STRICTER:
            set_at = v.get(f"stricter {kw}")
            if isinstance(set_at, tuple) and refuses(kw, set_at[1]):
                raise SshConfigError(refusal(kw, set_at[1], set_at[0]))
        hostname = st.final_host if st.final else self._hostname(host, st)
        user = str(v.get("user", self.local_user))
        port = int(v.get("port", 22))  # type: ignore[call-overload]
        alias = v.get("hostkeyalias")
        alias_s = alias.lower() if isinstance(alias, str) else None
        tokens = self.tokens(hostname, user, port, host, alias_s or host)

        def path(p: str, set_by: str, keyword: str) -> str:
            at = st.where.get(set_by, where)
            return percent_expand(
                expand_tilde(p, self.home, at), tokens, f"{at}: {keyword}", self.env
            )

        raw_ids = tuple(st.identity_files) or DEFAULT_IDENTITY_FILES
        ids = tuple(
            path(p, f"identityfile {p}", "IdentityFile") for p in raw_ids if p.lower() != "none"
        )
        ukh_raw = v.get("userknownhostsfile")
        ukh_list = list(ukh_raw) if isinstance(ukh_raw, list | tuple) else []
        ukh: tuple[str, ...] = ("none",)
        if not (ukh_list and ukh_list[0].lower() == "none"):
            ukh = tuple(
                path(p, "userknownhostsfile", "UserKnownHostsFile")
                for p in (ukh_list or DEFAULT_USER_KNOWN_HOSTS)
            )
        gkh_raw = v.get("globalknownhostsfile")
        gkh = tuple(gkh_raw) if isinstance(gkh_raw, list | tuple) else DEFAULT_GLOBAL_KNOWN_HOSTS
        jump = v.get("proxyjump")
        command = v.get("proxycommand")
        timeout = v.get("connecttimeout")
        alive = v.get("serveraliveinterval")
        count = v.get("serveralivecountmax")
        return Resolved(
            host,
            hostname,
            user,
            port,
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
            server_alive_interval=int(alive) if isinstance(alive, int) else 0,
            server_alive_count_max=int(count) if isinstance(count, int) else 3,
            sources=tuple(dict.fromkeys(st.sources)),
            crypto=tuple(
                (kw, *v[f"crypto {kw}"])  # type: ignore[misc]
                for kw in CRYPTO_KEYWORDS
                if f"crypto {kw}" in v
            ),
        )


def resolver(path: str | None) -> Resolver:
    """A resolver for `path` (~ expanded; "none" or a missing file: no config)."""
    if path is None or path.lower() == "none":
        return Resolver(None)
    return Resolver(str(Path(path).expanduser()))
