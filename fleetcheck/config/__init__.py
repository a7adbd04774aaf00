"""Typed, validated configuration: hosts.toml into frozen dataclasses.

Every error names the file, the table and the key, and is raised as ConfigError before any
network step: a typo must never become a silent no-op nor a traceback. A check's table is
validated against its config dataclass, a host's against HostConfig plus the per-host settings
each check declares (`Check.host_config_type`): this package knows no check's keys. A host's
own value wins, then its [groups.NAME] in the order it lists them, then [defaults].

`values` (markers, errors, names, URLs), `tables` (the config classes), `builder` (a TOML table
into a config class), `loading` (finding and reading hosts.toml), `files` (the files it names,
a host's effective settings), `report` (what `config check` prints).
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
