"""Typed, validated configuration: hosts.toml into frozen dataclasses.

Every error names the file, the table and the key, and is raised as ConfigError before any
network step: a typo must never become a silent no-op (goss's failure mode) nor a traceback.
A check's own table is validated against that check's config dataclass with the same builder;
a host's table against HostConfig (how to reach it) plus the per-host settings each check
declares (`Check.host_config_type`): this module knows no check's keys. [defaults] and
[groups.NAME] hold the same per-host keys; a host's own value wins, then its groups in the
order it lists them, then [defaults].

One job per module: `values` (markers, errors, names and URLs), `tables` (the config
classes), `builder` (a TOML table into a config class), `loading` (finding and reading
hosts.toml), `files` (the files it names, a host's effective settings), `report` (what
`config check` prints). Every name is importable from `fleetcheck.config` as before.
"""

from fleetcheck.config.builder import (
    build,
)
from fleetcheck.config.files import (
    FileProblem,
    check_files,
    effective,
)
from fleetcheck.config.loading import (
    NOT_SHARED,
    TOP_LEVEL,
    CheckConfigLookup,
    HostTypesLookup,
    find_config,
    from_dict,
    load,
)
from fleetcheck.config.tables import (
    BrokerConfig,
    FleetConfig,
    HostConfig,
    OutputsConfig,
    PatrolConfig,
    SshConfig,
    http_url_problem,
    zone,
)
from fleetcheck.config.values import (
    DURATION,
    LOCAL_FILE,
    RESERVED_IN_USERINFO,
    SAFE_NAME,
    SAFE_NAME_TEXT,
    SEARCH_HINT,
    URL_ALIASES,
    URL_SCHEMES,
    ConfigError,
    Duration,
    InvalidValue,
    IpAddress,
    LocalFile,
    check_port,
    normalise_broker_url,
)

__all__ = [
    "BrokerConfig",
    "CheckConfigLookup",
    "ConfigError",
    "DURATION",
    "Duration",
    "FileProblem",
    "FleetConfig",
    "HostConfig",
    "HostTypesLookup",
    "InvalidValue",
    "IpAddress",
    "LOCAL_FILE",
    "LocalFile",
    "NOT_SHARED",
    "OutputsConfig",
    "PatrolConfig",
    "RESERVED_IN_USERINFO",
    "SAFE_NAME",
    "SAFE_NAME_TEXT",
    "SEARCH_HINT",
    "SshConfig",
    "TOP_LEVEL",
    "URL_ALIASES",
    "URL_SCHEMES",
    "build",
    "check_files",
    "check_port",
    "effective",
    "find_config",
    "from_dict",
    "http_url_problem",
    "load",
    "normalise_broker_url",
    "zone",
]
