"""The log format library: the stamp shapes of common systems (catalog), how a match becomes
a Stamp (fields), which shape a tail is written in (detect) and what to tell an operator whose
tail fits none (advice)."""

from fleetcheck.parse.logformats.catalog import BY_NAME, FORMATS, LogFormat
from fleetcheck.parse.logformats.detect import Detection, detect, find_in

__all__ = ["BY_NAME", "FORMATS", "Detection", "LogFormat", "detect", "find_in"]
