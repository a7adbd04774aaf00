"""fleetcheck: per-host inspection of a worker fleet that shares one Redis/Valkey broker.

Kept import-light on purpose: `fleetcheck --version` and `--help` must not pull in
redis or paramiko.
"""

__version__ = "0.1.0"
