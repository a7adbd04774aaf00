"""--format json: the documented `fleetcheck.report/1` object."""

from __future__ import annotations

import json

from fleetcheck.model import Report


def render(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, default=str)
