"""The logs check's settings ([checks.logs]) and the facts its probe hands to evaluate.

Apart from the judging so that validating a config file imports this and nothing heavier;
the per-host keys (tz, logs) are the core's (fleetcheck.core.hostfacts), shared with the
checks that read a host's logs too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleetcheck.config import Duration
from fleetcheck.core.judge import check_duration

if TYPE_CHECKING:  # the parsers load only when a patrol reads a log
    from fleetcheck.parse.journal import JournalFacts
    from fleetcheck.parse.logtail import LogFacts, ZoneFacts


@dataclass(frozen=True)
class LogsConfig:
    max_clock_skew: Duration = 60.0  # WARN when the host's clock is off by more than this
    zone_check: bool = True  # compare each newest line with the file's mtime

    def __post_init__(self) -> None:
        check_duration("max_clock_skew", self.max_clock_skew)


@dataclass(frozen=True)
class LogsFacts:
    logs: tuple[LogFacts | JournalFacts, ...]
    clock_skew_s: float | None = None
    zone: ZoneFacts | None = None  # only for tz = "auto"
