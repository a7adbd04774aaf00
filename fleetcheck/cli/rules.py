"""`fleetcheck rules`: Prometheus alerting rules for what fleetcheck publishes (`serve`'s
/metrics, the textfile node_exporter serves), to save as a rule file. They fire on the rows
that alert (fail_after respected, silenced rows never: `fleetcheck_check_alerting`), one rule
per severity, and when fleetcheck itself stopped patrolling."""

from typing import Annotated

from fleetcheck.cli.app import app, command
from fleetcheck.cli.common import DurationArg, Opt, duration

RULES = """\
# fleetcheck's alerting rules (`fleetcheck rules`): rows that alert, and fleetcheck itself
# not patrolling. They read fleetcheck_* series from `fleetcheck serve`'s /metrics or from
# the textfile node_exporter serves; a row is one alert per job and instance that shows it.
groups:
  - name: fleetcheck
    rules:
      - alert: FleetcheckRowCritical
        expr: >-
          fleetcheck_check_alerting == 1
          and on (job, instance, check, host) fleetcheck_check_severity == 3
        labels:
          severity: critical
        annotations:
          summary: >-
            {{ if $labels.host }}{{ $labels.host }}{{ else }}broker-wide{{ end }}
            {{ $labels.check }}: CRIT (fleetcheck)
      - alert: FleetcheckRowUnknown
        expr: >-
          fleetcheck_check_alerting == 1
          and on (job, instance, check, host) fleetcheck_check_severity == 2
        labels:
          severity: warning
        annotations:
          summary: >-
            {{ if $labels.host }}{{ $labels.host }}{{ else }}broker-wide{{ end }}
            {{ $labels.check }}: UNKNOWN, fleetcheck could not look
      - alert: FleetcheckRowWarning
        expr: >-
          fleetcheck_check_alerting == 1
          and on (job, instance, check, host) fleetcheck_check_severity == 1
        labels:
          severity: warning
        annotations:
          summary: >-
            {{ if $labels.host }}{{ $labels.host }}{{ else }}broker-wide{{ end }}
            {{ $labels.check }}: WARN (fleetcheck)
      - alert: FleetcheckNotPatrolling
        expr: time() - fleetcheck_last_run_timestamp_seconds > STALE
        labels:
          severity: critical
        annotations:
          summary: >-
            fleetcheck has not finished a patrol for {{ $value | humanizeDuration }}
            ({{ $labels.instance }})
      - alert: FleetcheckMetricsAbsent
        expr: absent(fleetcheck_last_run_timestamp_seconds)
        for: STALE_FOR
        labels:
          severity: critical
        annotations:
          summary: "no fleetcheck patrol results reach Prometheus"
"""


def rules_text(stale_after: float = 2700.0) -> str:
    """The rule file; a patrol older than `stale_after` seconds (default 3 x the default 15m
    patrol interval) is "not patrolling"."""
    seconds = int(stale_after)
    return RULES.replace("STALE_FOR", f"{seconds}s").replace("STALE", str(seconds))


@command(app, "rules")
def rules_cmd(
    stale_after: Annotated[
        DurationArg | None,
        Opt(
            "--stale-after",
            metavar="DURATION",
            parser=duration,
            help="A patrol older than this is 'not patrolling' (default 45m: 3 x 15m).",
        ),
    ] = None,
) -> None:
    """Prometheus alerting rules for fleetcheck's metrics (save as a rule file)."""
    seconds = stale_after.seconds if stale_after and stale_after.seconds else 2700.0
    print(rules_text(seconds), end="")
