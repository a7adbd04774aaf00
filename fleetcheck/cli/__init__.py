"""The command line: one thin module per command group over functions that return text and
an exit code. Kept import-light: `--help` and `--version` must not load redis or paramiko, so
everything heavy is imported inside the command that needs it.

The command modules are not imported here: the root group imports the one module of the
command it resolves (`app.OWN`), and lists the commands in `OWN`'s order (the commands checks
add, and the `config` group, follow: see `app.RootGroup`).
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
