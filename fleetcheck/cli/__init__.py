"""The command line. Kept import-light: `--help` and `--version` must not load redis or
paramiko, so everything heavy is imported inside the command that needs it.

Exit codes follow Nagios: 0 OK, 1 WARN, 2 CRIT, 3 UNKNOWN. Usage and config errors exit 3
with one line on stderr (click's own usage errors would exit 2, which cron and Nagios read
as CRITICAL).

No `from __future__ import annotations` in this module: typer reads every command's
parameter annotations before it runs any command, and from strings that is an eval per
annotation (~280 of them, ~20 ms of every start-up, `--help` included).
"""

import enum
import inspect
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from fleetcheck import __version__

if TYPE_CHECKING:
    from fleetcheck.config import FleetConfig
    from fleetcheck.core.model import Report
    from fleetcheck.transport.keep import Keeper

EXIT_USAGE = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C
# -h as well as --help, on every command (click hands the names down to subcommands)
CONTEXT = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="fleetcheck",
    help="Inspect a fleet of worker machines that share one Redis/Valkey broker.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=CONTEXT,
)
config_app = typer.Typer(
    help="Validate and show the configuration.", no_args_is_help=True, context_settings=CONTEXT
)
app.add_typer(config_app, name="config", short_help="Validate and show the configuration.")

F = TypeVar("F", bound=Callable[..., Any])


def command(group: typer.Typer, name: str) -> Callable[[F], F]:
    """A command whose one-line description in its group's help is the docstring's whole first
    paragraph (click would cut it at 45 characters with "...")."""

    def register(func: F) -> F:
        first = inspect.cleandoc(func.__doc__ or "").split("\n\n")[0]
        return group.command(name, short_help=" ".join(first.split()))(func)

    return register


@dataclass(frozen=True)
class DurationArg:
    """A duration option's value: as typed (for messages) and in seconds. `seconds` is None
    only for --every patrol (the config's [patrol] every)."""

    text: str
    seconds: float | None


def _duration(value: object) -> DurationArg:
    """The one type of every duration option: 900s, 15m, 1h30m or plain seconds, longer than
    0s. Its error is a click BadParameter, which `main` prints as `--option: message`."""
    if isinstance(value, DurationArg):  # a default, already converted
        return value
    from fleetcheck.parse.duration import parse_duration

    text = str(value)
    try:
        seconds = parse_duration(text)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    if seconds <= 0:
        raise typer.BadParameter(f"bad duration {text!r}: must be longer than 0s")
    return DurationArg(text, seconds)


def _every(value: object) -> DurationArg:
    """--every: a duration, or `patrol` for the config's [patrol] every."""
    if value == "patrol":
        return DurationArg("patrol", None)
    return _duration(value)


def split_list(values: list[str] | None) -> list[str]:
    """A repeatable option's values, each of which may also be a comma-separated list
    (`--only broker,live_hash` = `--only broker --only live_hash`)."""
    return [part.strip() for v in values or () for part in v.split(",") if part.strip()]


class Format(enum.StrEnum):
    table = "table"
    plain = "plain"
    json = "json"
    nagios = "nagios"
    prometheus = "prometheus"


class UsageFailure(Exception):
    """A usage or config problem: one line on stderr, exit 3."""


ConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="hosts.toml (else $FLEETCHECK_CONFIG, ./hosts.toml, ~/.config/fleetcheck/hosts.toml)",
    ),
]
EveryOpt = Annotated[
    DurationArg | None,
    typer.Option(
        "--every",
        metavar="DURATION",
        parser=_every,
        help="Patrol every DURATION (e.g. 15m); 'patrol' = [patrol] every.",
    ),
]
HistoryOpt = Annotated[
    Path | None,
    typer.Option("--history", metavar="FILE", help="History file (default: the config's)."),
]
FormatOpt = Annotated[
    Format | None,
    typer.Option(
        "--format",
        "-f",
        metavar="FORMAT",
        help="table, plain, json, nagios or prometheus (default: table on a terminal, "
        "plain otherwise)",
    ),
]

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        print(f"fleetcheck {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Tracebacks for internal errors.")] = False,
) -> None:
    _state["debug"] = debug


def load_fleet(config: str | None) -> "FleetConfig":
    from fleetcheck.config import ConfigError, find_config, load
    from fleetcheck.core import registry

    try:
        return load(find_config(config), registry.config_type, registry.host_config_types)
    except ConfigError as e:
        raise UsageFailure(str(e)) from None


def patrol_interval(fleet: "FleetConfig", every: DurationArg | None) -> float | None:
    """Seconds between rounds for `--every` (None without it; 'patrol': [patrol] every)."""
    if every is None:
        return None
    interval = fleet.patrol.every if every.seconds is None else every.seconds
    if interval <= 0:
        raise UsageFailure(f"--every {every.text}: must be longer than 0s")
    return interval


def output_format(fmt: Format | None) -> Format:
    if fmt is not None:
        return fmt
    return Format.table if sys.stdout.isatty() else Format.plain


def round_keeper(fleet: "FleetConfig", interval: float | None) -> "Keeper | None":
    """The SSH connections a long-running process (`run --every`, `serve --every`) keeps
    between its rounds: a Keeper when the rounds are at most `[ssh] keep_alive_for` apart,
    else None (every round connects anew). The caller closes it when it stops."""
    if interval is None or not 0 < interval <= fleet.ssh.keep_alive_for:
        return None
    from fleetcheck.transport.keep import Keeper

    return Keeper(fleet.ssh.keep_alive_for)


def render_text(report: "Report", fmt: Format, problems: bool = False) -> str:
    """The report in a text format (everything but the rich table); `problems`: only the rows
    that are not OK, plus the counts (table and plain)."""
    if fmt is Format.json:
        from fleetcheck.render import json as render_json

        return render_json.render(report)
    if fmt is Format.nagios:
        from fleetcheck.render import nagios

        return nagios.render(report)
    if fmt is Format.prometheus:
        from fleetcheck.render import prometheus

        return prometheus.render(report).rstrip("\n")
    from fleetcheck.render import plain

    return plain.render(report, problems)


def emit(report: "Report", fmt: Format, problems: bool = False) -> None:
    if fmt is Format.table:
        from rich.console import Console

        from fleetcheck.render import table

        table.render(report, Console(), problems)
    else:
        print(render_text(report, fmt, problems), flush=True)


Opt = typer.Option


@command(app, "run")
def run(
    config: ConfigOpt = None,
    format: FormatOpt = None,
    only: Annotated[
        list[str] | None,
        Opt("--only", metavar="CHECK", help="Run only this check (repeatable, or CHECK,CHECK)."),
    ] = None,
    host: Annotated[
        list[str] | None,
        Opt("--host", metavar="NAME", help="Check only this host (repeatable, or NAME,NAME)."),
    ] = None,
    every: EveryOpt = None,
    rounds: Annotated[
        int | None,
        Opt("--rounds", metavar="N", min=1, help="With --every: stop after N rounds."),
    ] = None,
    state: Annotated[
        Path | None, Opt("--state", metavar="FILE", help="State file (default: XDG state dir).")
    ] = None,
    no_state: Annotated[bool, Opt("--no-state", help="No memory across runs, no history.")] = False,
    history: Annotated[
        Path | None,
        Opt("--history", metavar="FILE", help="History file, one JSON line per round."),
    ] = None,
    textfile: Annotated[
        Path | None,
        Opt("--textfile", metavar="FILE", help="Also write Prometheus metrics here (atomic)."),
    ] = None,
    alertmanager: Annotated[
        list[str] | None,
        Opt(
            "--alertmanager",
            metavar="URL",
            help="Alertmanager base URL to push alerts to (repeatable: every one gets every "
            "alert). Else [outputs] alertmanager / alertmanager_env.",
        ),
    ] = None,
    heartbeat: Annotated[
        str | None,
        Opt(
            "--heartbeat",
            metavar="URL",
            help="URL to ping after each patrol (else [outputs] heartbeat).",
        ),
    ] = None,
    shard: Annotated[
        str | None, Opt("--shard", metavar="I/N", help="Check only this share of the hosts.")
    ] = None,
    problems: Annotated[
        bool,
        Opt("--problems", help="Table/plain: show only the rows not OK (the counts stay)."),
    ] = False,
) -> None:
    """One patrol of the fleet (or one every --every); exit code is the worst status."""
    from fleetcheck.core import registry, runner
    from fleetcheck.rounds import patrol
    from fleetcheck.rounds import state as state_mod

    fleet = load_fleet(config)
    only, host = split_list(only), split_list(host)
    try:
        checks = registry.select([*fleet.checks, *only])
        items = runner.plan(fleet, checks, only, host)
        if shard:
            part = patrol.parse_shard(shard)
            items = [i for i in items if patrol.in_shard(i.target, part)]
    except ValueError as e:
        raise UsageFailure(str(e)) from None
    interval = patrol_interval(fleet, every)
    if rounds is not None and interval is None:
        raise UsageFailure("--rounds goes with --every")
    try:
        am_urls, beat_url, text_path = patrol.resolve_outputs(
            fleet, alertmanager, heartbeat, textfile
        )
    except patrol.OutputError as e:
        raise UsageFailure(str(e)) from None
    default_state, default_history = state_mod.default_paths(fleet.path)
    outputs = patrol.Outputs(
        state=None if no_state else (state or default_state),
        history=history if history or no_state else default_history,
        textfile=text_path,
        alertmanager=am_urls,
        heartbeat=beat_url,
    )
    fmt = output_format(format)
    if problems and fmt not in (Format.table, Format.plain):
        raise UsageFailure(
            f"--problems goes with --format table or plain (not {fmt.value}: machine formats "
            "always carry every row)"
        )

    keeper = round_keeper(fleet, interval)

    def one() -> "Report":
        return patrol.one_round(fleet, items, outputs, keeper)

    if interval is None:
        report = one()
        emit(report, fmt, problems)
        raise typer.Exit(report.exit_code)
    from fleetcheck.rounds import watch as live

    shown = Format.plain if fmt is Format.table else fmt
    try:
        last = live.run_loop(
            one,
            interval,
            rounds,
            None
            if fmt is Format.table and sys.stdout.isatty()
            else partial(render_text, fmt=shown, problems=problems),
            next_note=shown is Format.plain,
            problems=problems,
        )
    finally:
        if keeper is not None:
            keeper.close()
    raise typer.Exit(last.exit_code if last else EXIT_INTERRUPTED)


@command(app, "checks")
def list_checks() -> None:
    """The available checks, one line each."""
    from fleetcheck.core import registry

    for name, check in sorted(registry.available().items()):
        print(f"{name:<14} {check.scope.value:<7} {check.description}")


@command(config_app, "check")
def config_check(
    config: ConfigOpt = None,
    ssh: Annotated[
        bool,
        typer.Option(
            "--ssh",
            help="Also print each host's resolved SSH target (user, address, port, jump "
            "chain, key files, known_hosts files), as ssh_config resolves it; connects nowhere.",
        ),
    ] = False,
    elsewhere: Annotated[
        bool,
        typer.Option(
            "--elsewhere",
            help="The patrol runs on another machine: files the config names that are "
            "missing here are warnings, not errors.",
        ),
    ] = False,
) -> None:
    """Validate the config, check the files it names, and print each host's effective
    settings."""
    fleet = load_fleet(config)
    if ssh:
        from fleetcheck.transport.ssh import describe_targets

        text, ok = describe_targets(fleet)
        print(text)
        if not ok:
            raise typer.Exit(3)
        return
    from fleetcheck.config import check_files, effective
    from fleetcheck.parse.duration import format_duration
    from fleetcheck.transport.redis import redact_url

    problems = check_files(fleet, elsewhere)
    for p in problems:
        kind = "error" if p.error else "warning"
        print(f"fleetcheck: {kind}: {p.text(fleet.path)}", file=sys.stderr)
    if any(p.error for p in problems):
        raise typer.Exit(EXIT_USAGE)
    print(f"config: {fleet.path}: valid")
    b = fleet.broker
    where = redact_url(b.url) if b.url else b.address
    extra = [f"user {b.username}"] if b.username else []
    if b.password_env:
        extra.append(f"password from ${b.password_env}")
    elif b.password_file:
        extra.append(f"password from {b.password_file}")
    if b.ca_file:
        extra.append(f"CA {b.ca_file}")
    print(
        f"broker: {where} (connect timeout {format_duration(b.connect_timeout)}"
        + "".join(f", {x}" for x in extra)
        + ")"
    )
    print(
        f"patrol: every {format_duration(fleet.patrol.every)}, deadline "
        f"{format_duration(fleet.patrol.deadline)}"
    )
    print(f"checks: {', '.join(fleet.checks) or '(none)'}")
    if fleet.notes:
        print("durations written as bare numbers:")
        for note in fleet.notes:
            print(f"  {note}")
    print(f"hosts ({len(fleet.hosts)}):")
    for h in fleet.hosts:
        values = effective(h)
        shown = " ".join(f"{key}={_setting_text(value)}" for key, value, _ in values)
        print(f"  {h.name}: {shown}")
        inherited: dict[str, list[str]] = {}
        for key, _, where in values:
            if where not in ("", "hosts"):
                inherited.setdefault(where, []).append(key)
        if inherited:
            print(
                "    "
                + "; ".join(f"from [{w}]: {', '.join(keys)}" for w, keys in inherited.items())
            )


def _setting_text(value: object) -> str:
    """A per-host value as `config check` lists it: lists comma-joined, unset as '-'."""
    if value is None or value == ():
        return "-"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


@command(config_app, "discover")
def config_discover(
    config: ConfigOpt = None,
    url: Annotated[
        str | None,
        Opt("--url", metavar="URL", help="Broker URL (default: the config's [broker])."),
    ] = None,
    ssh_config: Annotated[
        str | None,
        Opt(
            "--ssh-config",
            metavar="FILE",
            help="ssh_config to match (default: [ssh] config_file).",
        ),
    ] = None,
    write: Annotated[
        Path | None,
        Opt("--write", metavar="FILE", help="Write the draft to FILE (else stdout)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Let --write replace a file.")] = False,
    scan_limit: Annotated[
        int,
        Opt("--scan-limit", metavar="N", min=1, help="Look at no more than N keys."),
    ] = 10000,
) -> None:
    """A hosts.toml draft from the broker's CLIENT LIST, INFO and a bounded SCAN (read-only)."""
    from fleetcheck.config import BrokerConfig, ConfigError, SshConfig, find_config
    from fleetcheck.transport.redis import connect, describe_error

    fleet: FleetConfig | None = None
    if config is not None or url is None:
        fleet = load_fleet(config)
    else:
        try:
            found = find_config(None)
        except ConfigError:
            found = None  # --url and no config yet: the first-time user
        if found is not None:
            try:
                fleet = load_fleet(str(found))
            except UsageFailure as e:
                print(
                    f"fleetcheck: warning: {e}; the addresses it claims are not marked",
                    file=sys.stderr,
                )
    if url is not None:
        from fleetcheck.config import InvalidValue

        try:
            broker = BrokerConfig(url=url)
        except InvalidValue as e:
            raise UsageFailure(f"--url: {e.message}") from None
    else:
        assert fleet is not None
        broker = fleet.broker
    if write is not None and write.exists() and not force:
        raise UsageFailure(f"--write {write}: exists (add --force to replace it)")
    ssh_path = ssh_config or (fleet.ssh.config_file if fleet else SshConfig().config_file)
    import redis

    from fleetcheck import discover
    from fleetcheck.transport.redis import BrokerSetupError

    try:
        r = connect(broker)
    except BrokerSetupError as e:
        raise UsageFailure(f"broker: {e}") from None
    except redis.RedisError as e:  # Sentinel: no master found
        raise UsageFailure(f"broker: {describe_error(e, broker)}") from None
    try:
        db = int(r.connection_pool.connection_kwargs.get("db") or 0)
        sample = discover.sample_broker(r, db, scan_limit=scan_limit)
    except redis.RedisError as e:
        raise UsageFailure(f"broker: {describe_error(e, broker)}") from None
    finally:
        r.close()
    claimed: dict[str, str] = {}
    if fleet is not None:
        from fleetcheck.core.hostfacts import addrs_of
        from fleetcheck.parse.clientlist import normalise_ip

        for h in fleet.hosts:
            for a in addrs_of(h):
                claimed.setdefault(normalise_ip(a), h.name)
    addrs = {c.host for c in sample.clients}
    aliases = discover.ssh_aliases(ssh_path, addrs)
    hosts = discover.group_hosts(sample.clients, aliases, claimed)
    text = discover.draft(sample, broker, hosts, fleet.path if fleet else None, ssh_path)
    if write is None:
        print(text, end="")
        return
    try:
        discover.write_draft(write, text, force)
    except FileExistsError:
        raise UsageFailure(f"--write {write}: exists (add --force to replace it)") from None
    except OSError as e:
        raise UsageFailure(f"--write {write}: {e.strerror or e}") from None
    print(f"wrote {write}: {len(hosts)} hosts; fill in its TODOs, then `fleetcheck config check`")


@command(app, "demo")
def demo_cmd(
    keep: Annotated[bool, typer.Option("--keep", help="Leave the fleet running.")] = False,
    local: Annotated[
        bool, typer.Option("--local", help='Loopback only: ssh = "local" hosts, no namespaces.')
    ] = False,
    format: FormatOpt = None,
) -> None:
    """A throwaway fleet on this machine with the incidents behind the checks planted,
    patrolled once."""
    import shutil

    if shutil.which("redis-server") is None:
        raise UsageFailure("the demo needs redis-server (apt-get install redis-server)")
    from fleetcheck.lab import demo

    fmt = output_format(format)
    code = demo.run_demo(keep, lambda report: emit(report, fmt), netns=False if local else None)
    raise typer.Exit(code)


@command(app, "history")
def history_cmd(
    config: ConfigOpt = None,
    host: Annotated[str | None, Opt("--host", metavar="NAME", help="Only this host.")] = None,
    since: Annotated[
        DurationArg,
        Opt("--since", metavar="DURATION", parser=_duration, help="How far back, e.g. 24h."),
    ] = "24h",  # type: ignore[assignment]  # converted by _duration
    history: HistoryOpt = None,
) -> None:
    """Per-host timeline of past patrols: one cell per round, coloured by status."""
    from datetime import timedelta

    from fleetcheck.core.context import utcnow
    from fleetcheck.rounds import history as hist
    from fleetcheck.rounds import state as state_mod

    back = since.seconds or 0.0
    path = history or state_mod.default_paths(load_fleet(config).path)[1]
    if not path.exists():
        raise UsageFailure(f"{path}: no history yet (run `fleetcheck run` first)")
    rounds, bad = hist.load(path, utcnow() - timedelta(seconds=back))
    lines = hist.timeline(rounds, host)
    if host is not None and not lines:
        raise UsageFailure(f"--host {host}: not in the history of the last {since.text}")
    from rich.console import Console

    from fleetcheck.render import history as render_history

    render_history.render(rounds, lines, Console(), bad)


@command(app, "timer")
def timer_cmd(
    config: ConfigOpt = None,
    every: Annotated[
        DurationArg | None,
        Opt(
            "--every",
            metavar="DURATION",
            parser=_duration,
            help="Interval, e.g. 15m (default: [patrol] every).",
        ),
    ] = None,
    show: Annotated[
        bool, typer.Option("--print", help="Print the units and the crontab line (default).")
    ] = False,
    install: Annotated[
        bool, typer.Option("--install", help="Write the units to --dir (no systemctl run).")
    ] = False,
    directory: Annotated[
        str, Opt("--dir", metavar="DIR", help="Where --install writes the units.")
    ] = "/etc/systemd/system",
    name: Annotated[
        str, Opt("--name", metavar="NAME", help="Unit name (one per fleet).")
    ] = "fleetcheck",
    user: Annotated[
        str,
        Opt(
            "--user",
            metavar="USER",
            help="The account the service runs as ('root': no User= line).",
        ),
    ] = "fleetcheck",
    run_args: Annotated[
        list[str] | None, typer.Argument(metavar="-- RUN_OPTION", hidden=True)
    ] = None,
) -> None:
    """systemd service + timer (and a crontab line) that run one patrol every --every.

    Options for the patrol itself go after --, as for `fleetcheck run`: e.g.
    `fleetcheck timer -c hosts.toml -- --textfile /var/lib/node_exporter/fleet.prom`."""
    import re

    from fleetcheck import timer

    if show and install:
        raise UsageFailure("--print and --install: choose one")
    if not re.fullmatch(r"[A-Za-z0-9_.:-]+", name) or name.startswith("."):
        raise UsageFailure(f"--name {name!r}: use letters, digits, '_', '.', ':' or '-'")
    fleet = load_fleet(config)
    interval = fleet.patrol.every
    if every is not None and every.seconds is not None:
        interval = every.seconds
        if interval < 1:
            raise UsageFailure(f"--every {every.text}: must be at least 1s")
    if not re.fullmatch(r"[a-z_][a-z0-9_-]*[$]?", user) or len(user) > 32:
        raise UsageFailure(f"--user {user!r}: not a user name")
    params = check_run_args(fleet, list(run_args or []))
    service_user = None if user == "root" else user
    writable, home_read = timer.confinement(fleet, params, service_user)
    units = timer.build(
        fleet.path,
        interval,
        fleet.patrol.deadline,
        name,
        list(run_args or []),
        user=service_user,
        writable=writable,
        home_read=home_read,
    )
    if not install:
        print(f"# /etc/systemd/system/{units.service_file}")
        print(units.service)
        print(f"# /etc/systemd/system/{units.timer_file}")
        print(units.timer)
        cron_user = f"-u {service_user} " if service_user else ""
        print(f"# or, without systemd, this crontab line (crontab {cron_user}-e):")
        print(units.crontab)
    else:
        try:
            paths = timer.install(units, directory)
        except OSError as e:
            raise UsageFailure(f"--install into {directory}: {e.strerror or e}") from None
        for path in paths:
            print(f"wrote {path}")
        print(f"now run: systemctl daemon-reload && systemctl enable --now {units.timer_file}")
    if service_user is not None and not timer.user_exists(service_user):
        print(
            f"fleetcheck: warning: user {service_user!r} does not exist here: create it before "
            f"enabling the timer (useradd --system --home-dir /var/lib/fleetcheck --shell "
            f"/usr/sbin/nologin {service_user}; README: Install for production)",
            file=sys.stderr,
        )
    checkout = timer.source_checkout()
    if checkout is not None:
        print(
            f"fleetcheck: warning: this fleetcheck runs from the source tree {checkout}: the "
            "units would run whatever a git pull leaves there; install the wheel "
            "(README: Install for production) and run its timer",
            file=sys.stderr,
        )


@command(app, "serve")
def serve_cmd(
    config: ConfigOpt = None,
    listen: Annotated[
        str,
        Opt("--listen", metavar="ADDR:PORT", help="Where to listen (default loopback only)."),
    ] = "127.0.0.1:8470",
    history: HistoryOpt = None,
    window: Annotated[
        DurationArg,
        Opt(
            "--window",
            metavar="DURATION",
            parser=_duration,
            help="How much history the charts show, e.g. 7d.",
        ),
    ] = "7d",  # type: ignore[assignment]  # converted by _duration
    every: EveryOpt = None,
    token_env: Annotated[
        str | None,
        Opt("--token-env", metavar="VAR", help="Env var holding a bearer token to require."),
    ] = None,
    basic_auth_env: Annotated[
        str | None,
        Opt("--basic-auth-env", metavar="VAR", help="Env var holding USER:PASSWORD to require."),
    ] = None,
) -> None:
    """A read-only web console over the state the patrols write: grid, rows, charts,
    /report.json, /metrics and /healthz (503 when rounds stop)."""
    import signal
    import threading

    from fleetcheck.console import server as serve
    from fleetcheck.console import source as console_mod
    from fleetcheck.rounds import state as state_mod

    fleet = load_fleet(config)
    try:
        host, port = serve.parse_listen(listen)
        window_s = window.seconds or 0.0
    except ValueError as e:
        raise UsageFailure(str(e)) from None
    interval = patrol_interval(fleet, every)
    secrets: dict[str, str | None] = {"token": None, "basic": None}
    for key, var, option in (
        ("token", token_env, "--token-env"),
        ("basic", basic_auth_env, "--basic-auth-env"),
    ):
        if var is None:
            continue
        value = os.environ.get(var, "")
        if not value:
            raise UsageFailure(f"{option} {var}: the environment variable is unset or empty")
        if key == "basic" and ":" not in value:
            raise UsageFailure(f"{option} {var}: expected USER:PASSWORD")
        secrets[key] = value
    default_state, default_history = state_mod.default_paths(fleet.path)
    history_path = history or default_history
    app_console = serve.Console(
        source=console_mod.Source(history_path),
        every=interval or fleet.patrol.every,
        window=window_s,
        window_text=window.text,
        max_ages=console_mod.config_max_ages(fleet),
        auth=serve.Auth(secrets["token"], secrets["basic"]),
    )
    try:
        server = serve.make_server(app_console, host, port)
    except OSError as e:
        raise UsageFailure(f"--listen {listen}: {e.strerror or e}") from None
    stop = threading.Event()
    keeper: Keeper | None = None
    if interval is not None:
        from fleetcheck.core import registry, runner
        from fleetcheck.rounds import patrol

        items = runner.plan(fleet, registry.available())
        outputs = patrol.Outputs(state=default_state, history=history_path)
        keeper = round_keeper(fleet, interval)
        serve.start_patrols(lambda: patrol.one_round(fleet, items, outputs, keeper), interval, stop)
    bound_host, bound_port = (str(part) for part in server.server_address[:2])
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(f"fleetcheck serve: http://{shown}:{bound_port}/ (history {history_path})", flush=True)
    if not app_console.auth.required and host not in ("127.0.0.1", "::1", "localhost"):
        print(
            f"fleetcheck: warning: listening on {listen} without --token-env/--basic-auth-env",
            file=sys.stderr,
        )

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        server.server_close()
        if keeper is not None:
            keeper.close()  # a round still running closes what it hands back


def check_run_args(fleet: "FleetConfig", args: list[str]) -> dict[str, Any]:
    """Parse `fleetcheck run` options exactly as `run` will (typos, values, output targets),
    so `timer` never writes a unit that fails at its first activation; returns them."""
    from fleetcheck.rounds import patrol

    command = typer.main.get_command(app)
    run_command = command.commands["run"]  # type: ignore[attr-defined]
    try:
        ctx = run_command.make_context("run", list(args))
    except Exception as e:
        message = usage_message(e) if _is_click_error(e) else e
        raise UsageFailure(f"run options after --: {message}") from None
    params = _as_declared(run, ctx.params)
    for loop in ("every", "rounds"):
        if params.get(loop) is not None:
            raise UsageFailure(
                f"run options after --: --{loop} would keep the oneshot service running: "
                "the timer schedules the rounds (use timer --every)"
            )
    if params.get("config"):
        raise UsageFailure(
            "run options after --: --config is timer's own option (put it before --)"
        )
    try:
        patrol.resolve_outputs(
            fleet, params.get("alertmanager"), params.get("heartbeat"), params.get("textfile")
        )
    except patrol.OutputError as e:
        raise UsageFailure(f"run options after --: {e}") from None
    return params


def _as_declared(function: Callable[..., Any], params: dict[str, Any]) -> dict[str, Any]:
    """A parsed context's paths as `function`'s annotations declare them: typer turns text
    into Path in its call wrapper, not in click's parsing, so a context from `make_context`
    holds strings where the command itself gets a Path."""
    import typing

    hints = typing.get_type_hints(function)
    out = dict(params)
    for name, value in params.items():
        if not isinstance(value, str):
            continue
        hint = hints.get(name)
        for kind in typing.get_args(hint) or (hint,):
            if isinstance(kind, type) and issubclass(kind, Path):
                out[name] = kind(value)
                break
    return out


@command(app, "probe-rater")
def probe_rater(
    config: ConfigOpt = None,
    timeout: Annotated[
        DurationArg | None,
        Opt(
            "--timeout",
            metavar="DURATION",
            parser=_duration,
            help="How long the rater gets, e.g. 5s.",
        ),
    ] = None,
    format: FormatOpt = None,
) -> None:
    """Only the rater probe: push one envelope into its inbox and time its consumption.
    Exit 0 consumed, 2 not consumed, 3 broker unreachable."""
    from dataclasses import replace

    from fleetcheck.checks.rater_probe import CHECK as RATER
    from fleetcheck.checks.rater_probe import RaterProbeConfig
    from fleetcheck.core.runner import Planned, run_patrol

    fleet = load_fleet(config)
    cfg = fleet.checks.get("rater_probe") or RaterProbeConfig()
    if timeout is not None:
        try:
            cfg = replace(cfg, timeout=timeout.seconds)
        except ValueError as e:
            raise UsageFailure(f"--timeout: {getattr(e, 'message', e)}") from None
    b = fleet.broker
    # far past the probe's own bound, so the deadline never cuts it before it takes its
    # envelope back
    deadline = 2 * cfg.timeout + 3 * (b.retries + 1) * (b.connect_timeout + b.socket_timeout) + 10
    fleet = replace(fleet, patrol=replace(fleet.patrol, deadline=deadline))
    report = run_patrol(fleet, [Planned(RATER, cfg, None)])
    emit(report, output_format(format))
    raise typer.Exit(report.exit_code)


@command(app, "reap-live")
def reap_live(
    config: ConfigOpt = None,
    max_age: Annotated[
        DurationArg | None,
        Opt(
            "--max-age",
            metavar="DURATION",
            parser=_duration,
            help="Stale past this age (default: config, 900s).",
        ),
    ] = None,
    apply: Annotated[bool, typer.Option("--apply", help="Delete (default: dry run).")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Delete even when the guard refuses (more than half the hash, started_field "
            "in no entry, max_age below the match wall).",
        ),
    ] = False,
    key: Annotated[str | None, Opt("--key", metavar="KEY", help="The live hash's key.")] = None,
    keep_malformed: Annotated[
        bool, typer.Option("--keep-malformed", help="Leave entries without a start time.")
    ] = False,
    show: Annotated[int, Opt("--show", metavar="N", help="Entries listed (0: all).")] = 20,
) -> None:
    """Stale live-hash entries: listed (dry run), deleted with --apply, each only if its value
    is still the one judged stale."""
    from fleetcheck.checks.live_hash.reaper import reap_live_command

    fleet = load_fleet(config)
    age = None if max_age is None else max_age.seconds
    code = reap_live_command(
        fleet,
        key=key,
        max_age=age,
        apply=apply,
        force=force,
        keep_malformed=keep_malformed,
        show=show,
    )
    raise typer.Exit(code)


def fail(message: str) -> NoReturn:
    print(f"fleetcheck: error: {message}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


def _is_click_error(e: Exception) -> bool:
    """click's own exceptions (ClickException and its UsageError) by their public shape:
    typer vendors click in a private module, and we do not import private modules."""
    return (
        callable(getattr(e, "show", None))
        and callable(getattr(e, "format_message", None))
        and isinstance(getattr(e, "exit_code", None), int)
    )


def usage_message(e: Exception) -> str:
    """A click usage error as one line that names the option: `--every: bad duration ...`,
    `no such option: --bogus (fleetcheck run -h lists them)`."""
    message = str(getattr(e, "message", "") or e.format_message())  # type: ignore[attr-defined]
    message = " ".join(message.split()).removesuffix(".")
    message = re.sub(r"^value error, ", "", message, flags=re.I)
    param = getattr(e, "param", None)
    ctx = getattr(e, "ctx", None)
    words = []
    while ctx is not None:
        root = ctx.parent is None
        words.append(ctx.info_name if not root or not hasattr(ctx.command, "commands") else "")
        ctx = ctx.parent
    words.append("fleetcheck")  # a root that is not the group: `timer -- RUN_OPTION`'s `run`
    where = " ".join(w for w in reversed(words) if w)
    if param is not None and getattr(type(e), "__name__", "") == "BadParameter":
        opts = getattr(param, "opts", None) or [param.human_readable_name]
        name = max(opts, key=len)
        return f"{name}: {message[:1].lower()}{message[1:]}"
    option = getattr(e, "option_name", None)
    if option and type(e).__name__ == "BadOptionUsage":  # `--every` given last, no value
        return f"{option}: needs a value"
    return f"{message[:1].lower()}{message[1:]} (see `{where} -h`)"


def main() -> None:
    try:
        rv = app(standalone_mode=False, prog_name="fleetcheck")
    except UsageFailure as e:
        fail(str(e))
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        print("fleetcheck: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        print("fleetcheck: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as e:
        if _is_click_error(e):  # a usage error found by click (bad option, bad value)
            if type(e).__name__ == "NoArgsIsHelpError":  # bare `fleetcheck`: the help itself
                e.show()  # type: ignore[attr-defined]
                sys.exit(EXIT_USAGE)
            fail(usage_message(e))
        if _state["debug"] or os.environ.get("FLEETCHECK_DEBUG"):
            raise
        fail(f"internal error: {type(e).__name__}: {e} (run with --debug for a traceback)")
    sys.exit(rv if isinstance(rv, int) else 0)
