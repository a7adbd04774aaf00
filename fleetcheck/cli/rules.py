"""`fleetcheck rules`: Prometheus alerting rules for what fleetcheck publishes (`serve`'s
/metrics, the textfile): one rule per severity of the rows that alert, and one for a
fleetcheck that stopped patrolling."""

from typing import Annotated

from fleetcheck.cli.app import app, command
from fleetcheck.cli.common import DurationArg, duration_opt

RULES = """\
# fleetcheck's alerting rules (`fleetcheck rules`): rows that alert, and fleetcheck itself
# not patrolling. They read fleetcheck_* series from `fleetcheck serve`'s /metrics or from
# the textfile node_exporter serves; a row is one alert per job and instance that shows it.
groups:
  - name: fleetcheck
    rules:
ROWS
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
# one rule per severity: (alert name suffix, fleetcheck_check_severity, label, what it says)
ROW_RULES = (
    ("Critical", 3, "critical", "CRIT (fleetcheck)"),
    ("Unknown", 2, "warning", "UNKNOWN, fleetcheck could not look"),
    ("Warning", 1, "warning", "WARN (fleetcheck)"),
)
ROW_RULE = """\
      - alert: FleetcheckRow{name}
        expr: >-
          fleetcheck_check_alerting == 1
          and on (job, instance, check, host) fleetcheck_check_severity == {severity}
        labels:
          severity: {label}
        annotations:
          summary: >-
            {{{{ if $labels.host }}}}{{{{ $labels.host }}}}{{{{ else }}}}broker-wide{{{{ end }}}}
            {{{{ $labels.check }}}}: {says}"""


def rules_text(stale_after: float = 2700.0) -> str:
    """The rule file; a patrol older than `stale_after` seconds (default 3 x the default 15m
    patrol interval) is "not patrolling"."""
    seconds = int(stale_after)
    rows = [ROW_RULE.format(name=n, severity=s, label=lb, says=t) for n, s, lb, t in ROW_RULES]
    return (
        RULES.replace("ROWS", "\n".join(rows))
        .replace("STALE_FOR", f"{seconds}s")
        .replace("STALE", str(seconds))
    )


@command(app, "rules")
def rules_cmd(
    stale_after: Annotated[
        DurationArg | None,
        duration_opt(
            "--stale-after", "A patrol older than this is 'not patrolling' (default 45m: 3 x 15m)."
        ),
    ] = None,
) -> None:
    """Prometheus alerting rules for fleetcheck's metrics (save as a rule file)."""
    seconds = stale_after.seconds if stale_after and stale_after.seconds else 2700.0
    print(rules_text(seconds), end="")
