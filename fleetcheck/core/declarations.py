"""What a check declares about its rows for the parts of the framework that read them after a
patrol: `explain`'s clues and causes, the peer comparison, the verdicts that need the whole
patrol (correlate) and the console's charts. A check lists them as class attributes
(`Check.clues`, `causes`, `peer_metrics`, `correlations`, `charts`), small frozen values with
no check name in them: the framework reads them through the registry.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetcheck.core.errors import HOST_UNREACHABLE
from fleetcheck.core.model import Status, Strength


# ------------------------------------------------------------------- explain
@dataclass(frozen=True)
class Clue:
    """A change worth a line in `explain`'s timeline, read off one of the check's rows.

    The row must be not OK (unless `any_status`) and, when `metric` is set, its metric within
    [at_least, at_most]. Its time is the evidence's `at_key` (a UTC ISO time, e.g. the last
    log line's) when given, else the start of the run of recorded rounds in which the same
    held (the history), else since when the row has its status (the state). `words` may say
    "{summary}", "{value}", "{at}" and "{line}": the text at the first of the `line` paths
    that has one in the row's evidence (keys and list indexes, e.g. ("logs", 0, "last_line"))."""

    words: str
    metric: str | None = None
    at_least: float | None = None
    at_most: float | None = None
    at_key: str | None = None
    any_status: bool = False
    line: tuple[tuple[str | int, ...], ...] = (("last_line",),)


@dataclass(frozen=True)
class Cause:
    """A likely cause `explain` reads off one of the check's rows (status in `statuses`,
    metric in range; the first of a check's causes that fits its row is the one). Its strength
    is `inference` unless told: the row proves a condition, that the condition caused the rest
    is inferred until `confirm` is seen. `upstream`: where it sits in a chain of causes, lower
    first (a route problem explains lost broker connections, which explain a silent log): of
    several causes on one host, the most upstream is named the likely one."""

    cause: str  # may say "{summary}" and "{value}"
    confirm: str
    metric: str | None = None
    at_least: float | None = None
    at_most: float | None = None
    statuses: tuple[str, ...] = ("WARN", "CRIT")
    strength: str = Strength.INFERENCE.value
    upstream: int = 50


# ------------------------------------------------------------------- peers
@dataclass(frozen=True)
class PeerMetric:
    """A metric of the check's host rows on which a host is compared with its peers
    (`fleetcheck.core.peers`). `direction`: "both", "higher" or "lower" (which departures
    count)."""

    metric: str
    words: str  # what the value is, after the number: "connections"
    direction: str
    floor: float  # the smallest departure that matters
    rel: float  # the smallest departure as a share of the peers' median
    unit: str = ""  # "s" for seconds (shown as a duration), "/s" for a rate
    # a metric that is None reads as this when `zero_if` (another metric) is 0: no error
    # lines means an error rate of 0, not "not measured"
    zero_if: str | None = None


# ------------------------------------------------------------------- correlate
@dataclass(frozen=True)
class HalfOpen:
    """A host that did not answer at all, yet whose `count` metric on the check's row shows
    connections: that OK row becomes `status`, "likely half-open", with the cause of the
    host's unreachability (so the outputs show it as one problem with its SSH rows).

    WARN, not CRIT: the host's own SSH rows already carry the failure; this row adds what it
    means for the broker, and that is inferred (a path cut between this machine and the host
    alone would look the same)."""

    count: str
    marker: str = HOST_UNREACHABLE
    status: Status = Status.WARN


# ------------------------------------------------------------------- the console's charts
@dataclass(frozen=True)
class Line:
    """A line of a broker-wide chart: `metric` of the check's broker-wide row, or with
    `limit` a setting it was judged against (from the row's `limits`), drawn as a reference."""

    metric: str
    label: str = ""  # the legend's word (default: the metric's name)
    limit: bool = False


@dataclass(frozen=True)
class ChartSpec:
    """A chart of the console's `/charts` page over the check's rows.

    Broker-wide: `lines` of its broker-wide row (nothing drawn until a measured line has a
    point). Per host: `per_host`, the metric of its host rows, a line per host; a fleet larger
    than the page draws (`MAX_LINES`) shows the hosts with the `pick` ("fewest" or "most")
    of it, said in the title as "with the {picked}". Its reference lines, one per distinct
    value, named `limit_label` (and the hosts, when they differ): `limit`, a key of the host
    rows' `limits` (each host's newest); or with `items`, for a check whose rows are per item
    (a log file), a host's line follows the item `Check.chart_focus` picks for it and that
    item's limit (from the config) is drawn (`items` names the map in which a row of the whole
    host, as written before rows per item, kept each item's metrics)."""

    key: str  # the section's id, unique among the console's charts
    title: str
    decision: str  # the decision this chart informs, one line
    unit: str = "count"  # "count" or "seconds"
    lines: tuple[Line, ...] = ()
    per_host: str | None = None
    pick: str = "most"
    picked: str = ""
    limit: str | None = None
    items: str | None = None
    limit_label: str = "limit"
    place: int = 50  # where on the page, lower first

    def __post_init__(self) -> None:
        if (self.per_host is None) == (not self.lines):
            raise ValueError(f"chart {self.key!r}: either lines (broker-wide) or per_host")
        if self.unit not in ("count", "seconds") or self.pick not in ("fewest", "most"):
            raise ValueError(f"chart {self.key!r}: unit count|seconds, pick fewest|most")
