"""The command line: one thin module per command group over functions that return text and
an exit code. Kept import-light: `--help` and `--version` must not load redis or paramiko, so
everything heavy is imported inside the command that needs it.

Importing this package registers the commands in the order `fleetcheck --help` lists them
(the commands checks add, and the `config` group, follow: see `app.RootGroup`).
"""

# ruff: noqa: I001  (the order of these imports is the order of the listing)
from fleetcheck.cli import run as _run  # noqa: F401  (run, checks)
from fleetcheck.cli import demo as _demo  # noqa: F401
from fleetcheck.cli import history as _history  # noqa: F401
from fleetcheck.cli import explain as _explain  # noqa: F401
from fleetcheck.cli import timer as _timer  # noqa: F401
from fleetcheck.cli import doctor as _doctor  # noqa: F401
from fleetcheck.cli import serve as _serve  # noqa: F401
from fleetcheck.cli import notify as _notify  # noqa: F401
from fleetcheck.cli import silence as _silence  # noqa: F401
from fleetcheck.cli import rules as _rules  # noqa: F401
from fleetcheck.cli import config as _config  # noqa: F401  (config check, config discover)
from fleetcheck.cli.app import app, config_app, main
from fleetcheck.cli.common import split_list
from fleetcheck.cli.serve import serve_cmd

app.add_typer(config_app, name="config", short_help="Validate and show the configuration.")

__all__ = ["app", "main", "serve_cmd", "split_list"]
