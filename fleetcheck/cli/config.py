"""`fleetcheck config check` (validate, check the files, show the effective settings) and
`fleetcheck config discover` (a hosts.toml draft from the broker)."""

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetcheck.cli.app import app, command, config_app
from fleetcheck.cli.common import (
    ConfigOpt,
    DeadlineOpt,
    Opt,
    UsageFailure,
    load_fleet,
)

if TYPE_CHECKING:
    from fleetcheck.config import FleetConfig

app.add_typer(config_app)  # as `config` (its name, help and short help are config_app's own)


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
    connect: Annotated[
        bool,
        typer.Option(
            "--connect",
            help="Also log in to the broker and every host as a patrol would "
            "(`fleetcheck doctor`); writes nothing.",
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
    from fleetcheck.config.report import config_report

    out, warnings, code = config_report(fleet, elsewhere)
    from fleetcheck.core.stderr import say

    if not code and not elsewhere:
        warnings += environment_warnings(fleet)
    for line in warnings:
        say(line)
    if out:
        print(out + _rows_not_made(fleet))
    if code:
        raise typer.Exit(code)
    if connect:
        from fleetcheck.cli.doctor import run_doctor

        raise typer.Exit(run_doctor(config))


def environment_warnings(fleet: "FleetConfig", service_user: str = "fleetcheck") -> list[str]:
    """What the timer's patrol would see differently from this shell: a variable the config
    names that is set neither here nor in the environment file, and `~` paths of [ssh] that
    are this user's files, not the service user's."""
    import os

    from fleetcheck.envfile import wanted

    env_file = fleet.patrol.environment_file
    where = f"neither in the environment nor in {env_file}" if env_file else "in the environment"
    out = []
    for name in wanted(fleet):
        key = "[broker] password_env" if name == fleet.broker.password_env else "[outputs] *_env"
        if not os.environ.get(name):
            out.append(f"fleetcheck: warning: {key} names ${name}, which is set {where}")
    config_file = fleet.ssh.config_file
    uses_ssh = any(h.ssh is not None and not h.is_local for h in fleet.hosts)
    if not (uses_ssh and (config_file == "~" or config_file.startswith("~/"))):
        return out
    from fleetcheck.cli.run import owner
    from fleetcheck.timer import service_home

    me = owner()[0]
    mine = os.path.expanduser(config_file)
    theirs = service_home(service_user) + config_file[1:]
    if me != service_user and mine != theirs and os.path.isfile(mine):
        out.append(
            f"fleetcheck: warning: [ssh] config_file {config_file} is {mine} here ({me}), but "
            f"{theirs} for the timer's user {service_user}: set config_file to a path both "
            f"read, or check as the timer does: runuser -u {service_user} -- fleetcheck doctor"
        )
    return out


def _rows_not_made(fleet: "FleetConfig") -> str:
    """Hosts an enabled check makes no row for by design, with its reason (a check says why
    through `why_no_row(host, config)`: the clients check for a host with no broker
    expectations, such as a bastion)."""
    from fleetcheck.core import registry

    lines = []
    for name, cfg in fleet.checks.items():
        why: Any = getattr(registry.available().get(name), "why_no_row", None)
        for h in fleet.hosts if why is not None else ():
            reason = why(h, cfg)
            if reason:
                lines.append(f"  {h.name}: no {name} row ({reason})")
    return "\nrows not made:\n" + "\n".join(lines) if lines else ""


def _ansible_inventory(given: str | None) -> str | None:
    """The Ansible inventory discover reads: --ansible, else $ANSIBLE_INVENTORY or
    /etc/ansible/hosts when it exists and ansible-inventory is on PATH (None: none)."""
    import os

    from fleetcheck.config.inventory_programs import find_program

    if given is not None:
        return given
    if find_program("ansible-inventory") is None:
        return None
    default = os.environ.get("ANSIBLE_INVENTORY") or "/etc/ansible/hosts"
    return default if os.path.exists(default) else None


def _discover_broker(config: str | None, url: str | None) -> "tuple[FleetConfig | None, Any]":
    """The config discover marks claimed addresses from (None: --url and no config yet, the
    first-time user) and the broker it samples (--url, with the config's password, or the
    config's)."""
    from fleetcheck import discover as discover_mod
    from fleetcheck.config import ConfigError, InvalidValue, find_config
    from fleetcheck.core.stderr import warn

    fleet: FleetConfig | None = None
    if config is not None or url is None:
        fleet = load_fleet(config)
        if url is None:
            return fleet, fleet.broker
    else:
        with contextlib.suppress(ConfigError):  # no config found: nothing claimed yet
            found = find_config(None)
            try:
                fleet = load_fleet(str(found))
            except UsageFailure as e:
                warn(f"{e}; the addresses it claims are not marked")

    try:
        return fleet, discover_mod.broker_for_url(url, fleet)  # the config's password too
    except InvalidValue as e:
        raise UsageFailure(f"--url: {e.message}") from None


def _sample(broker: Any, limit: float, scan_limit: int) -> Any:
    """discover's broker sample, connecting included, within one overall deadline."""
    import redis

    from fleetcheck import discover
    from fleetcheck.parse.duration import format_duration
    from fleetcheck.transport.deadline import DeadlineExpired
    from fleetcheck.transport.redis import BrokerSetupError, describe_error

    try:
        return discover.sample_within(broker, limit, scan_limit=scan_limit)
    except BrokerSetupError as e:
        raise UsageFailure(f"broker: {e}") from None
    except DeadlineExpired:
        raise UsageFailure(
            f"broker {broker.address}: no complete answer within the deadline "
            f"({format_duration(limit)}; --deadline sets it)"
        ) from None
    except redis.RedisError as e:  # Sentinel: no master found; a failed read
        raise UsageFailure(f"broker: {describe_error(e, broker)}") from None


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
            "--ssh-config", metavar="FILE", help="ssh_config to match (default: [ssh] config_file)."
        ),
    ] = None,
    write: Annotated[
        Path | None,
        Opt("--write", metavar="FILE", help="Write the draft to FILE (else stdout)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Let --write replace a file.")] = False,
    ansible: Annotated[
        str | None,
        Opt(
            "--ansible",
            metavar="INVENTORY",
            help="Name hosts from this Ansible inventory and propose it as a source (default: "
            "$ANSIBLE_INVENTORY or /etc/ansible/hosts when there and ansible-inventory is).",
        ),
    ] = None,
    scan_limit: Annotated[
        int, Opt("--scan-limit", metavar="N", min=1, help="Look at no more than N keys.")
    ] = 10000,
    deadline: DeadlineOpt = None,
) -> None:
    """A hosts.toml draft from the broker's CLIENT LIST, INFO and a bounded SCAN (read-only)."""
    import time

    from fleetcheck import discover, discover_hosts, discover_ssh
    from fleetcheck.config import PatrolConfig, SshConfig
    from fleetcheck.core.stderr import warn
    from fleetcheck.parse.duration import format_duration

    fleet, broker = _discover_broker(config, url)
    if write is not None and write.exists() and not force:
        raise UsageFailure(f"--write {write}: exists (add --force to replace it)")
    ssh_path = ssh_config or (fleet.ssh.config_file if fleet else SshConfig().config_file)
    limit = (fleet.patrol if fleet else PatrolConfig()).deadline
    if deadline is not None and deadline.seconds is not None:
        limit = deadline.seconds
    until = time.monotonic() + limit  # the one deadline: broker talk and ssh alias step
    sample = _sample(broker, limit, scan_limit)
    claimed = discover_hosts.claimed_addresses(fleet) if fleet is not None else {}
    addrs = {c.host for c in sample.clients}
    unresolved: list[str] = []  # the alias step's Match exec commands share the deadline
    aliases = discover_ssh.ssh_aliases(ssh_path, addrs, until=until, unresolved=unresolved)
    if unresolved:
        warn(
            f"{ssh_path}: {len(unresolved)} ssh alias(es) not resolved within the deadline "
            f"({format_duration(limit)}; --deadline sets it): their hosts are named by address"
        )
    hosts = discover_hosts.group_hosts(sample.clients, aliases, claimed)
    inventory, in_inventory = _ansible_inventory(ansible), 0
    if inventory is not None:
        from fleetcheck.config.inventory import SourceFailed

        try:
            names = discover.ansible_addresses(inventory, until - time.monotonic())
        except SourceFailed as e:
            if ansible is not None:  # asked for: say why it was not used
                warn(f"--ansible {inventory}: {e.reason}; hosts are not named from it")
        else:
            label = f"the Ansible inventory {inventory}"
            hosts, in_inventory = discover.named_by_inventory(hosts, names, label)
    proposals = discover.inventory_tables(hosts, ssh_path, inventory, in_inventory)
    text = discover.draft(sample, broker, hosts, fleet.path if fleet else None, ssh_path, proposals)
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
