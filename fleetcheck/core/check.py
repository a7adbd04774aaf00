"""The contract every check follows: declare, probe (I/O), evaluate (pure).

A check module defines one subclass of `Check` (`HostCheck` for one row per host) and a
module-level `CHECK = TheCheck()`. `probe` measures through the per-patrol context and returns
plain facts; `evaluate` turns facts into a Result without any I/O, so it is table-tested. A
probe that cannot measure raises CheckError; anything else it raises is turned into UNKNOWN by
the runner, for that check and row only.

Configuration a check owns, both frozen dataclasses built and validated by the generic builder
(errors name file, table and key):
- `config_type`: the check-wide `[checks.NAME]` table.
- `host_config_type`: keys the check reads from each `[[hosts]]` table (also settable in
  `[defaults]` and `[groups.NAME]`); every field has a default. Read with
  `host.settings(TheType)`. A method `check_host(self, host)` may raise InvalidValue for rules
  that involve the host's own keys (e.g. "needs ssh").

Conventions (tests/test_check_contract.py holds every registered check to them):
- Metric names end in a unit suffix from `fleetcheck.model.UNIT_SUFFIXES` (`_s`, `_bytes`,
  `_ratio`, `_per_s`) or are plain counts (whole numbers); metric values are numbers, None when
  not measured, or maps whose leaves are. Strings and flags (a zone, a source, a time stamp, a
  link state, "consumed") go in `evidence`.
- A summary never starts with the host's name: renderers put the host next to it.
- `evaluate` is pure: no I/O, no clock but its `now`, the same facts give an equal Result.
- Shell fragments from `remote_commands` come back under the check's own keys:
  `ctx.host_facts(host, self).get("table")`.

Declarations (next to name and description; the contract test names the one a check lacks):
- `headline`: the metric that is each row's headline (Nagios' one perfdata item): a name, or
  names tried in order for a check whose rows differ (e.g. host rows and a broker-wide row).
  Metric order in the dict means nothing.
- `example`: the `[checks.NAME]` table as hosts.example.toml shows it, every key commented;
  `host_example`: the per-host keys it reads, as lines of a `[[hosts]]` table.
- `demo_fault(fleet)`: how `fleetcheck demo` plants this check's incident, returning the body
  of its `[checks.NAME]` table (None: not in this demo, e.g. it needs namespaces);
  `demo_meaning`: what a non-OK row means there, in the demo's words (`demo_explain` may vary
  it per row). The hook is typed against the lab only under `if TYPE_CHECKING:`.
- `broker_commands(fleet, config)`: every command the check sends to the broker under that config
  (`BrokerCommand`, keys marked with `Key`, `writes` for a write). `fleetcheck doctor` asks the
  broker's ACL about each as the configured user and names the check and the `+command` a
  refusal needs; docs/brokers.md's least-privilege ACL is derived from them
  (`python -m tests.catalog`); tests/test_doctor.py holds them to what a patrol sends.
- `discover_draft(sample)`: the check's `[checks.NAME]` table for `fleetcheck config discover`,
  from what the broker showed (`fleetcheck.core.discovery.Sample`); None leaves it out.
- `limits`: a Result keeps the settings its verdict was judged against in `limits`, never in
  `metrics` (which are measurements and become Prometheus series).
- What the framework does with its rows after a patrol (fleetcheck.core.declarations; the
  framework names no check, so these are the only place it learns them): `clues` and
  `causes` (`fleetcheck explain`'s timeline and likely cause), `peer_metrics` (metrics a host
  is compared with its peers on), `correlations` (verdicts that need the whole patrol) and
  `charts` (the console's `/charts`; `chart_focus` picks a host's item for a chart with
  `items`).

Rows finer than a target: where a target holds several things that each deserve their own
verdict, alert, silence and history (each log file of a host, each queue of a broker),
`evaluate` returns one row per item (`self.result(host, ..., item="/var/log/app.log")`), a
list. Every output addresses such a row by (check, host, item). A probe that fails still gives
one row for the whole target (item None).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from fleetcheck.core.declarations import Cause as CauseRule
from fleetcheck.core.declarations import ChartSpec, Clue, HalfOpen, PeerMetric
from fleetcheck.core.errors import CheckError  # the contract: probes raise it
from fleetcheck.core.model import Result, Status

if TYPE_CHECKING:
    from fleetcheck.config import FleetConfig, HostConfig
    from fleetcheck.core.context import PatrolContext
    from fleetcheck.core.discovery import Draft, Sample


@dataclass(frozen=True)
class Key:
    """A broker key among a command's words (an ACL grants keys apart from commands)."""

    name: str


@dataclass(frozen=True)
class BrokerCommand:
    """One command a check sends: its words, keys as `Key`, and whether it writes."""

    words: tuple[str | Key, ...]
    writes: bool = False

    @property
    def args(self) -> tuple[str, ...]:
        """The words as sent."""
        return tuple(w.name if isinstance(w, Key) else w for w in self.words)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(w.name for w in self.words if isinstance(w, Key))

    @property
    def name(self) -> str:
        """The command as ACL rules name it: `client|list` for a subcommand."""
        first = self.args[0].lower()
        if first in ("client", "acl", "config", "command", "script") and len(self.words) > 1:
            return f"{first}|{self.args[1].lower()}"
        return first


def cmd(*words: str | Key, writes: bool = False) -> BrokerCommand:
    """`cmd("LLEN", Key(queue))`: a check's `broker_commands` entry."""
    return BrokerCommand(tuple(words), writes)


class Scope(enum.Enum):
    """Where a check's probe does its I/O."""

    BROKER = "broker"  # talks to the broker; its rows are evaluated from broker facts
    HOST = "host"  # talks to the host over SSH; runs in that host's lane, one row per host


@dataclass(frozen=True)
class NoConfig:
    """For checks that take no options: `[checks.NAME]` must then be empty."""


ConfigT = TypeVar("ConfigT")
FactsT = TypeVar("FactsT")


class Check(Generic[ConfigT, FactsT]):
    name: ClassVar[str]
    description: ClassVar[str]
    scope: ClassVar[Scope]
    config_type: ClassVar[type] = NoConfig
    host_config_type: ClassVar[type | None] = None  # per-host keys this check reads
    # Declarations: everything else a check says about itself (see the module docstring)
    headline: ClassVar[str | tuple[str, ...] | None] = None
    example: ClassVar[str] = ""  # the [checks.NAME] table of hosts.example.toml, commented
    host_example: ClassVar[str] = ""  # its per-host keys, as lines of a [[hosts]] table
    demo_meaning: ClassVar[str] = ""  # what a non-OK row means in `fleetcheck demo`
    no_targets_reason: ClassVar[str] = ""  # the UNKNOWN row's text when targets() is empty
    # How strong the evidence of this check's WARN and CRIT rows is unless a row says otherwise
    # (fleetcheck.core.model.Strength's value); UNKNOWN rows are "absence" (nothing was seen)
    evidence_strength: ClassVar[str] = "proof"
    # What the framework does with its rows (fleetcheck.core.declarations)
    clues: ClassVar[tuple[Clue, ...]] = ()  # explain's timeline lines
    causes: ClassVar[tuple[CauseRule, ...]] = ()  # explain's likely causes
    peer_metrics: ClassVar[tuple[PeerMetric, ...]] = ()  # compared with the host's peers
    correlations: ClassVar[tuple[HalfOpen, ...]] = ()  # verdicts needing the whole patrol
    charts: ClassVar[tuple[ChartSpec, ...]] = ()  # the console's charts of its rows

    def demo_fault(self, fleet: Any) -> str | None:
        """Plant this check's incident in the demo fleet (`fleetcheck.lab.demo.DemoFleet`) and
        return the body of its `[checks.NAME]` table; None keeps the check out of this demo."""
        return None

    def demo_explain(self, result: Result) -> str | None:
        """The demo's line on one of this check's rows (None: nothing to say about it)."""
        return self.demo_meaning or result.summary if result.status is not Status.OK else None

    def explain_hint(self, result: Result) -> tuple[str, str] | None:
        """(likely cause, what would confirm it) for one of this check's rows not OK, for
        `fleetcheck explain`; None (the default) leaves it to the rules over rows there."""
        return None

    def broker_commands(self, fleet: FleetConfig, config: ConfigT) -> tuple[BrokerCommand, ...]:
        """Every command this check sends to the broker under `config` (none by default):
        doctor proves each against the ACL, docs/brokers.md's ACL is derived from them."""
        return ()

    def discover_draft(self, sample: Sample) -> Draft | None:
        """This check's table in `fleetcheck config discover`'s draft, from what the broker
        showed; None (the default) leaves it out of the draft."""
        return None

    def chart_focus(self, host: HostConfig) -> tuple[str, float] | None:
        """For a chart of this check with `items`: (the item `host`'s line follows, its limit,
        drawn as a reference line), from the host's settings; None: the row's own value."""
        return None

    def headline_of(self, metrics: dict[str, Any]) -> str | None:
        """The declared headline metric a row with these metrics has, or None."""
        names = (self.headline,) if isinstance(self.headline, str) else self.headline or ()
        return next((n for n in names if n in metrics), None)

    def targets(self, fleet: FleetConfig, config: ConfigT) -> list[HostConfig | None]:
        """The rows this check produces: None for one broker-wide row, a host for a host row.

        Broker checks default to one broker-wide row; host checks to every host with ssh.
        """
        if self.scope is Scope.BROKER:
            return [None]
        return [h for h in fleet.hosts if h.ssh is not None]

    def no_targets(self, fleet: FleetConfig, config: ConfigT) -> str:
        """Why `targets` found nothing: the summary of the one UNKNOWN row the check then gets
        (`no_targets_reason` declares it; "no host has logs configured")."""
        if self.no_targets_reason:
            return self.no_targets_reason
        if self.scope is Scope.HOST:
            return f"no host to check: no host in {fleet.path} has ssh set"
        return f"nothing to check: no target in {fleet.path}"

    def remote_commands(
        self, host: HostConfig, config: ConfigT, fleet: FleetConfig
    ) -> dict[str, str]:
        """Shell fragments this check needs from `host`, keyed by name.

        All fragments of all checks for a host run in one exec per patrol (every exec costs
        the host a login shell); `ctx.host_facts(host, self)` returns their outputs by key. Each
        fragment must bound its own output and quote every config value it embeds.
        """
        return {}

    def probe(self, ctx: PatrolContext, host: HostConfig | None, config: ConfigT) -> FactsT:
        raise NotImplementedError

    def evaluate(
        self, facts: FactsT, config: ConfigT, host: HostConfig | None, now: datetime
    ) -> Result | Sequence[Result]:
        raise NotImplementedError

    # helpers for building rows with this check's name
    def result(self, host: HostConfig | None, status: Status, summary: str, **kw: Any) -> Result:
        """A row of this check; its headline is the declared one (unless `headline=` says)."""
        kw.setdefault("headline", self.headline_of(kw.get("metrics") or {}))
        if status is not Status.OK and kw.get("evidence_strength") is None:
            kw["evidence_strength"] = self.default_strength(status)
        return Result(self.name, host.name if host else None, status, summary, **kw)

    def default_strength(self, status: Status) -> str | None:
        """The evidence strength of a row of `status` that did not declare its own."""
        if status is Status.OK:
            return None
        return "absence" if status is Status.UNKNOWN else self.evidence_strength


class HostCheck(Check[ConfigT, FactsT]):
    """A check with one row per host: its hooks are handed the host, never None."""

    scope: ClassVar[Scope] = Scope.HOST

    def probe(self, ctx: PatrolContext, host: HostConfig | None, config: ConfigT) -> FactsT:
        return self.probe_host(ctx, _row_host(self, host), config)

    def evaluate(
        self, facts: FactsT, config: ConfigT, host: HostConfig | None, now: datetime
    ) -> Result | Sequence[Result]:
        return self.evaluate_host(facts, config, _row_host(self, host), now)

    def probe_host(self, ctx: PatrolContext, host: HostConfig, config: ConfigT) -> FactsT:
        raise NotImplementedError

    def evaluate_host(
        self, facts: FactsT, config: ConfigT, host: HostConfig, now: datetime
    ) -> Result | Sequence[Result]:
        raise NotImplementedError


# ------------------------------------------------------------ commands a check adds to the CLI
@dataclass(frozen=True)
class CommandOption:
    """An option of a check's command. Its keyword to `run` is `flag` without the dashes, "-"
    as "_"; `kind`: "duration" (DURATION, in seconds), "flag" (on/off), "text" or "count"."""

    flag: str
    help: str
    kind: str = "text"
    metavar: str | None = None
    default: Any = None


@dataclass(frozen=True)
class CheckCommand:
    """`fleetcheck NAME`, declared by a check in a module-level `COMMANDS` tuple (in its module,
    or in `command.py` of its package). `help` is the command's help (its first paragraph its
    line in `fleetcheck --help`); `name` and `help` are string literals, keywords first, because
    fleetcheck.core.command_index reads them from the source without importing the check. `run`
    ("module:function", imported when the command runs) is called with the fleet and the
    options by keyword: it returns a Report when `report` (the CLI adds --format and prints it)
    or else an exit code, having printed its output."""

    name: str
    help: str
    run: str
    options: tuple[CommandOption, ...] = ()
    report: bool = False


def _row_host(check: Check[Any, Any], host: HostConfig | None) -> HostConfig:
    if host is None:  # only a targets() returning None for a host check gets here
        raise CheckError(f"{check.name} is a host check: it has no broker-wide row")
    return host
