"""--format json: the documented `fleetcheck.report/3` object, valid against the JSON Schema
shipped next to this package (fleetcheck/report.schema.json).

Metrics are numbers: this renderer writes a row's metrics as numbers, arrays of numbers and
maps of those only, and null for a metric the check could not measure this round (None). A
boolean becomes 0/1, a non-finite number null; strings and anything else are left out (a check
puts text in `evidence`, where it stays as it is). `limits` (the settings the verdict was
judged against) are written the same way, apart from the metrics; `headline` names the row's
headline metric (null: none).
"""

from __future__ import annotations

import json
import math
from importlib import resources
from typing import Any

from fleetcheck.core.model import Report

SCHEMA_FILE = "report.schema.json"


def schema() -> dict[str, Any]:
    """The JSON Schema of this format, as shipped in the package."""
    loaded: dict[str, Any] = json.loads(
        resources.files("fleetcheck").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    )
    return loaded


_DROP = object()  # a value with nothing numeric in it


def numeric(value: Any) -> Any:
    """The numeric part of a metric value: numbers, None (not measured), arrays of numbers and
    maps of those; _DROP when nothing numeric is left."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        kept = {str(k): v for k, v in ((k, numeric(v)) for k, v in value.items()) if v is not _DROP}
        return kept if kept or not value else _DROP
    if isinstance(value, list | tuple) and value:
        items = [numeric(v) for v in value]
        return items if all(type(v) in (int, float) for v in items) else _DROP
    return _DROP


def document(report: Report) -> dict[str, Any]:
    data = report.to_dict()
    for row in data["results"]:
        for part in ("metrics", "limits"):  # limits are numbers too: thresholds, caps, minimums
            kept = numeric(row[part]) if isinstance(row[part], dict) else _DROP
            row[part] = {} if kept is _DROP else kept
    return data


def render(report: Report) -> str:
    return json.dumps(document(report), indent=2, default=str, allow_nan=False)
