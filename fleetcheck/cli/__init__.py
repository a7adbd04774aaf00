"""The command line: one thin module per command group over functions that return text and
an exit code. Import-light (`--help` loads neither redis nor paramiko): the root group imports
only the module of the command it resolves (`app.OWN`).
"""

from typing import Any

from fleetcheck.cli.app import app, config_app, main
from fleetcheck.cli.common import split_list

__all__ = ["app", "config_app", "main", "serve_cmd", "split_list"]


def __getattr__(name: str) -> Any:
    if name == "serve_cmd":  # the `serve` command's function, imported when asked for
        from fleetcheck.cli.serve import serve_cmd

        return serve_cmd
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
