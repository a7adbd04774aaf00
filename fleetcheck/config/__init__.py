"""Typed, validated configuration: hosts.toml into frozen dataclasses. Every error names the
file, the table and the key, before any network step: a typo is never a silent no-op nor a
traceback. A check's table is validated by its config dataclass, a host's by HostConfig plus
each check's `host_config_type`: this package knows no check's keys.
"""

from fleetcheck.config.builder import build
from fleetcheck.config.loading import find_config, from_dict, load
from fleetcheck.config.tables import (
    BrokerConfig,
    FleetConfig,
    HostConfig,
    PatrolConfig,
    SshConfig,
    http_url_problem,
    zone,
)
from fleetcheck.config.values import (
    SAFE_NAME,
    ConfigError,
    Duration,
    InvalidValue,
    IpAddress,
    LocalFile,
)

__all__ = [
    "BrokerConfig",
    "ConfigError",
    "Duration",
    "FleetConfig",
    "HostConfig",
    "InvalidValue",
    "IpAddress",
    "LocalFile",
    "PatrolConfig",
    "SAFE_NAME",
    "SshConfig",
    "build",
    "find_config",
    "from_dict",
    "http_url_problem",
    "load",
    "zone",
]
