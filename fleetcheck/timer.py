"""`fleetcheck timer`: the systemd units (and the crontab line) that patrol on a schedule.

A oneshot service runs one `fleetcheck run` per activation (never two at once); the unit fails
only on exit 3 (UNKNOWN: fleetcheck could not look), since WARN and CRIT are verdicts the
outputs deliver. The crontab line runs the same patrol behind `flock -n` for machines without
systemd.
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetcheck.parse.duration import format_duration

TIMEOUT_MARGIN = 30.0
MAX_JITTER = 30.0
SYSTEM_DIR = "/etc/systemd/system"
ENVIRONMENT_FILE = "/etc/default/fleetcheck"
UNIT_MODE = 0o640
DEFAULT_USER = "fleetcheck"


@dataclass(frozen=True)
class Units:
    name: str
    service: str
    timer: str
    crontab: str  # one crontab line, or a comment saying why cron cannot do it

    @property
    def service_file(self) -> str:
        return f"{self.name}.service"

    @property
    def timer_file(self) -> str:
        return f"{self.name}.timer"


def fleetcheck_command() -> list[str]:
    """The absolute command that runs this fleetcheck: the entry point it was started as
    (symlinks resolved), else the script beside this interpreter, else `python -m fleetcheck`."""
    started = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if started is not None and started.name == "fleetcheck":
        found = started if started.is_absolute() or "/" in sys.argv[0] else None
        if found is None:
            which = shutil.which(sys.argv[0])
            found = Path(which) if which else None
        if found is not None and found.is_file() and os.access(found, os.X_OK):
            return [str(found.resolve())]
    beside = Path(sys.executable).parent / "fleetcheck"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "fleetcheck"]


def source_checkout() -> Path | None:
    """The source tree this fleetcheck runs from when it is not installed (a `git pull` there
    would change what a timer runs)."""
    package = Path(__file__).resolve().parent
    if any(part in ("site-packages", "dist-packages") for part in package.parts):
        return None
    root = package.parent
    return root if (root / "pyproject.toml").is_file() else None


def on_calendar(every: float) -> str | None:
    """OnCalendar= for `every` seconds (round times, so Persistent= catches up a missed run),
    or None when it does not divide a minute, an hour or a day."""
    s = round(every)
    if s <= 0 or abs(every - s) > 1e-9:
        return None
    if s < 60 and 60 % s == 0:
        return f"*-*-* *:*:00/{s}" if s > 1 else "*-*-* *:*:*"
    if s % 60 == 0 and s < 3600 and 60 % (s // 60) == 0:
        return f"*-*-* *:00/{s // 60}:00"
    if s % 3600 == 0 and s < 86400 and 24 % (s // 3600) == 0:
        return f"*-*-* 00/{s // 3600}:00:00"
    if s == 86400:
        return "*-*-* 00:00:00"
    return None


def cron_schedule(every: float) -> str | None:
    """The five cron fields for `every` seconds, or None when cron cannot express it."""
    s = round(every)
    if abs(every - s) > 1e-9 or s < 60 or s % 60:
        return None
    m = s // 60
    if m < 60 and 60 % m == 0:
        return "* * * * *" if m == 1 else f"*/{m} * * * *"
    if m % 60 == 0 and m < 1440 and 24 % (m // 60) == 0:
        h = m // 60
        return "0 * * * *" if h == 1 else f"0 */{h} * * *"
    if m == 1440:
        return "0 0 * * *"
    return None


def seconds_text(seconds: float) -> str:
    """A systemd time span: whole seconds, e.g. `90s`."""
    return f"{max(1, math.ceil(seconds))}s"


def systemd_quote(arg: str) -> str:
    """One ExecStart= argument: `%` and `$` escaped, quoted when it needs to be."""
    escaped = arg.replace("%", "%%").replace("$", "$$")
    if escaped and not any(c in escaped for c in " \t\n\"'\\;"):
        return escaped
    escaped = escaped.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


class UnitTextError(ValueError):
    """A value `timer` cannot write into a unit or crontab line without changing its meaning."""


def unit_value_problem(value: str) -> str | None:
    """Why `value` cannot go into a unit file or a crontab line (None when it can): both are
    line-oriented (a newline would start a line of its own) and read as UTF-8."""
    if not value.isprintable():
        return "holds a control character or line break"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    return None


def description_text(config: str) -> str:
    """The config path for Description=: `%` doubled (systemd expands specifiers there)."""
    return config.replace("%", "%%")


SECRET_FIX = (
    "ExecStart= and the crontab line are readable (systemctl show, ps): put the URL in "
    "/etc/default/fleetcheck and name its variable in [outputs] {key}_env (docs/operations.md)"
)


def url_secret(option: str, url: str) -> str | None:
    """Why a `run` output URL must not be written into the units (None when it may be): a
    user name or password, a query, or a heartbeat's path (its secret). Never repeats the URL."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return None  # run's own check names it
    key = option.lstrip("-")
    if parts.username is not None or parts.password is not None:
        what = "holds a user name or password"
    elif parts.query or parts.fragment:
        what = "has a query (a token?)"
    elif key == "heartbeat" and parts.path.strip("/"):
        what = "has a path (a heartbeat URL's path is its secret)"
    else:
        return None
    return f"{option} URL {what}: {SECRET_FIX.format(key=key)}"


def cron_escape(command: str) -> str:
    """A shell command for a crontab line: cron turns an unescaped % into a newline."""
    return command.replace("%", "\\%")


def build(
    config_path: str,
    every: float,
    deadline: float,
    name: str = "fleetcheck",
    run_args: list[str] | None = None,
    command: list[str] | None = None,
    user: str | None = DEFAULT_USER,
    writable: list[str] | None = None,
    home_read: bool = False,
    environment_file: str = ENVIRONMENT_FILE,
) -> Units:
    """The units and crontab line for patrolling `config_path` every `every` seconds as `user`
    (None: root); `writable`: directories written besides the state directory; `home_read`:
    files under a home directory are read (ProtectHome=read-only)."""
    config = str(Path(config_path).absolute())
    argv = [*(command or fleetcheck_command()), "run", "-c", config, *(run_args or [])]
    named = [("the config path", config), *(("a run option", a) for a in argv)]
    for what, value in [*named, *(("the directory", w) for w in writable or [])]:
        problem = unit_value_problem(value)
        if problem is not None:
            raise UnitTextError(f"{what} {value!r} {problem}: rename it")
    if "\\" in config:  # systemd does not unescape Description=; at the end it continues it
        raise UnitTextError(
            f"the config path {config!r} holds a backslash, which systemd would read as an "
            "escape in Description=: rename it"
        )
    exec_start = " ".join(systemd_quote(a) for a in argv)
    timeout = seconds_text(deadline + TIMEOUT_MARGIN)
    jitter = seconds_text(min(MAX_JITTER, every / 10))
    every_text = format_duration(every)
    environment_line = f"EnvironmentFile=-{environment_file}\n" if environment_file else ""

    service = f"""\
[Unit]
Description=fleetcheck patrol of {description_text(config)}
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
ExecStart={exec_start}
# the patrol deadline ({format_duration(deadline)}) plus a margin for startup and the outputs
TimeoutStartSec={timeout}
# 1 WARN and 2 CRIT are verdicts about the fleet; 3 (UNKNOWN, bad config) fails the unit
SuccessExitStatus=1 2
{environment_line}Environment=XDG_STATE_HOME=/var/lib
StateDirectory=fleetcheck
StateDirectoryMode=0700
{hardening(user, writable or [], home_read)}"""

    calendar = on_calendar(every)
    if calendar is not None:
        schedule = f"OnCalendar={calendar}\nPersistent=true\n"
    else:
        schedule = (
            f"OnBootSec={seconds_text(min(every, 60))}\nOnUnitActiveSec={seconds_text(every)}\n"
        )
    timer = f"""\
[Unit]
Description=fleetcheck patrol every {every_text} ({description_text(config)})

[Timer]
{schedule}RandomizedDelaySec={jitter}
AccuracySec=1s
Unit={name}.service

[Install]
WantedBy=timers.target
"""

    fields = cron_schedule(every)
    if fields is None:
        crontab = f"# cron cannot run every {every_text}; use the systemd timer"
    else:
        lock = f"/run/lock/{name}.lock"
        shell = shlex.join(["flock", "-n", lock, *argv])
        crontab = f"{fields} {cron_escape(shell)} >/dev/null"
    return Units(name=name, service=service, timer=timer, crontab=crontab)


def hardening(user: str | None, writable: list[str], home_read: bool) -> str:
    """The [Service] lines that confine a patrol to what it does: read its files, write its
    state directory (and `writable`), open IP, unix and netlink sockets, run the local host's
    shell tools. Everything else is denied."""
    lines = []
    if user:
        lines += [f"User={user}"]  # and its primary group
    lines += [
        "# the whole file system read-only but the state directory (and what follows)",
        "ProtectSystem=strict",
        f"ProtectHome={'read-only' if home_read else 'yes'}",
    ]
    lines += [f"ReadWritePaths={systemd_quote(path)}" for path in sorted(set(writable))]
    lines += [
        "PrivateTmp=yes",
        "PrivateDevices=yes",
        "PrivateIPC=yes",
        "PrivateMounts=yes",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=",
        "AmbientCapabilities=",
        "ProtectKernelTunables=yes",
        "ProtectKernelModules=yes",
        "ProtectKernelLogs=yes",
        "ProtectControlGroups=yes",
        "ProtectClock=yes",
        "ProtectHostname=yes",
        "ProtectProc=invisible",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK",
        "RestrictNamespaces=yes",
        "RestrictRealtime=yes",
        "RestrictSUIDSGID=yes",
        "LockPersonality=yes",
        "RemoveIPC=yes",
        "KeyringMode=private",
        "SystemCallArchitectures=native",
        "SystemCallFilter=@system-service",
        "SystemCallFilter=~@privileged @resources",
        "SystemCallErrorNumber=EPERM",
        "UMask=0077",
    ]
    return "".join(line + "\n" for line in lines)


HOME_PREFIXES = ("/home", "/root", "/run/user")


def service_home(user: str | None) -> str:
    """The home directory `~` means for the service (a user not made yet: its state directory)."""
    import pwd

    try:
        return pwd.getpwnam(user or "root").pw_dir
    except KeyError:
        return "/root" if user is None else "/var/lib/fleetcheck"


def under_home(path: str) -> bool:
    """A path ProtectHome=yes would hide."""
    return any(path == prefix or path.startswith(prefix + "/") for prefix in HOME_PREFIXES)


def confinement(fleet: Any, run_params: dict[str, Any], user: str | None) -> tuple[list[str], bool]:
    """What the hardened service must be allowed: the directories it writes besides its state
    directory, and whether a file it reads lives under a home directory."""
    home = service_home(user)

    def real(path: str) -> Path:
        if path == "~" or path.startswith("~/"):
            path = home + path[1:]
        return Path(path).absolute()

    writable: list[str] = []
    for key in ("textfile", "state", "history"):
        value = run_params.get(key)
        if value is not None:
            writable.append(str(real(str(value)).parent))
    if run_params.get("textfile") is None and fleet.outputs.textfile:
        writable.append(str(real(fleet.outputs.textfile).parent))
    known_files = list(fleet.ssh.known_hosts_files)
    if fleet.ssh.accept_new and known_files:
        writable.append(str(real(known_files[0]).parent))
    read = [fleet.path, fleet.ssh.config_file, *known_files, fleet.ssh.identity_file]
    broker = fleet.broker
    read += [broker.password_file, broker.ca_file, broker.cert_file, broker.key_file]
    paths = [real(str(p)) for p in read if p] + [real(w) for w in writable]
    return writable, any(under_home(str(p)) for p in paths)


def install(units: Units, directory: str = SYSTEM_DIR) -> list[Path]:
    """Write both units into `directory` (atomically, mode 0640: run options may name output
    targets); returns the paths."""
    from fleetcheck.files import replace_private

    written = []
    for filename, text in ((units.service_file, units.service), (units.timer_file, units.timer)):
        replace_private(Path(directory) / filename, text, UNIT_MODE)
        written.append(Path(directory) / filename)
    return written


def units_text(units: Units, user: str | None, environment_file: str = ENVIRONMENT_FILE) -> str:
    """What `timer --print` shows: each unit under the path it belongs at, then the crontab
    line (fleetcheck reads the environment file itself: the line needs no `. FILE`)."""
    cron_user = f"-u {user} " if user else ""
    lines = [
        f"# /etc/systemd/system/{units.service_file}",
        units.service,
        f"# /etc/systemd/system/{units.timer_file}",
        units.timer,
        f"# or, without systemd, this crontab line (crontab {cron_user}-e):",
    ]
    if environment_file and not units.crontab.startswith("#"):
        group = f"chgrp {user} {environment_file} && " if user else ""
        lines.append(
            f"# it reads {environment_file} itself, as the unit does ({group}chmod 0640 "
            f"{environment_file})"
        )
    return "\n".join([*lines, units.crontab])


def warnings(user: str | None) -> list[str]:
    """What the units would trip over here: a missing service user, a source checkout."""
    out = []
    if user is not None and user_identity(user) is None:
        out.append(
            f"user {user!r} does not exist here: create it before enabling the timer (useradd "
            f"--system --user-group --home-dir /var/lib/fleetcheck --shell /usr/sbin/nologin "
            f"{user} && install -d -o {user} -g {user} -m 0700 /var/lib/fleetcheck; "
            "docs/operations.md: The dedicated user)"
        )
    checkout = source_checkout()
    if checkout is not None:
        out.append(
            f"this fleetcheck runs from the source tree {checkout}: the units would run "
            "whatever a git pull leaves there; install the wheel (README: Install for "
            "production) and run its timer"
        )
    return out


def user_identity(user: str) -> tuple[int, set[int]] | None:
    """(uid, every gid) of `user`, None when it does not exist here."""
    import pwd

    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return None
    return entry.pw_uid, set(os.getgrouplist(user, entry.pw_gid))


def _allows(st: os.stat_result, uid: int, gids: set[int], bits: int) -> bool:
    """Whether mode bits `bits` (4 read, 1 execute) are granted to uid/gids (ACLs not read)."""
    if uid == 0:
        return True
    if st.st_uid == uid:
        return (st.st_mode >> 6) & bits == bits
    if st.st_gid in gids:
        return (st.st_mode >> 3) & bits == bits
    return st.st_mode & bits == bits


def access_problem(path: str, uid: int, gids: set[int], bits: int = 4) -> str | None:
    """The first reason uid/gids lack permission `bits` (4 read, 1 execute, 5 both) on `path`,
    directories on the way and symlinks' targets included; None when they have it."""
    import stat

    seen: set[str] = set()
    todo = [os.path.abspath(path)]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        parts = Path(current).parts
        walked = Path(parts[0])
        for part in parts[1:]:
            try:
                st = os.stat(walked)
            except OSError:
                return None  # a path this machine cannot look at: the other checks name it
            if not _allows(st, uid, gids, 1):
                return f"{walked} (mode {stat.S_IMODE(st.st_mode):04o}) cannot be entered"
            walked = walked / part
            if walked.is_symlink():
                todo.append(os.path.realpath(walked))
        try:
            st = os.stat(current)
        except OSError:
            return None
        if stat.S_ISDIR(st.st_mode):
            continue
        if not _allows(st, uid, gids, bits):
            how = {4: "read", 1: "run", 5: "read and run"}.get(bits, "used")
            return f"{current} (mode {stat.S_IMODE(st.st_mode):04o}) cannot be {how}"
    return None


def interpreter(command: list[str]) -> str:
    """The interpreter a command runs under: its script's `#!` line, else its first word."""
    try:
        with open(command[0], "rb") as f:
            first = f.readline(4096)
    except OSError:
        return command[0]
    if first.startswith(b"#!"):
        words = first[2:].decode("utf-8", errors="replace").split()
        if words:
            return words[0]
    return command[0]


def refusals(
    fleet: Any, user: str | None, command: list[str], libraries: list[str] | None = None
) -> list[str]:
    """Why the service user could not run this fleetcheck on its config, each with its fix:
    the entry point, its interpreter, `libraries` it imports (default: the standard library
    and this fleetcheck), the config file. Empty for root or a user not made yet."""
    if user is None:
        return []
    ident = user_identity(user)
    if ident is None:
        return []
    uid, gids = ident
    out = []
    python = interpreter(command)
    if libraries is None:
        libraries = [os.__file__, str(Path(__file__).resolve())]
    runtime = [
        ("the entry point", command[0], 5 if python != command[0] else 1),
        ("its interpreter", python, 1),
        *(("what it imports", path, 4) for path in libraries),
    ]
    for what, path, bits in runtime:
        problem = access_problem(path, uid, gids, bits)
        if problem is not None:
            out.append(
                f"user {user} cannot run {command[0]}: {what}: {problem}; install fleetcheck "
                f"from a python every user can run (e.g. /usr/bin/python3 -m venv "
                f"/opt/fleetcheck && /opt/fleetcheck/bin/pip install fleetcheck-*.whl), then "
                f"run its timer"
            )
            break
    config = str(Path(fleet.path).absolute())
    problem = access_problem(config, uid, gids)
    if problem is not None:
        out.append(
            f"user {user} cannot read the config {config}: {problem}; as root: chgrp {user} "
            f"{config} && chmod 0640 {config} (and chmod o+x on each directory above it)"
        )
    return out


def runtime_under_home(command: list[str]) -> bool:
    """Whether the entry point or its interpreter lives where ProtectHome=yes would hide it."""
    paths = [command[0], interpreter(command)]
    return any(under_home(p) or under_home(os.path.realpath(p)) for p in paths)


SYSTEMD_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system",
                "/lib/systemd/system", "/usr/local/lib/systemd/system")  # fmt: skip


def systemd_reads(directory: str) -> bool:
    """Whether systemd loads system units from `directory` (so `systemctl enable` applies)."""
    real = os.path.realpath(directory)
    return any(real == os.path.realpath(d) for d in SYSTEMD_DIRS)
