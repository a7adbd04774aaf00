"""The command line: one thin module per command group over functions that return text and
an exit code. Import-light (`--help` loads neither redis nor paramiko): the root group imports
only the module of the command it resolves (`app.OWN`).
"""

from fleetcheck.cli.app import app, main
from fleetcheck.cli.common import split_list

__all__ = ["app", "main", "split_list"]
