"""paramiko, imported on first use and once: `fleetcheck --help` and a broker-only patrol
never pay for it (tests/test_startup_imports.py), and a patrol's lanes that all connect at
once while it is still importing wait for the one import rather than race it."""

from __future__ import annotations

import sys
import threading
from typing import Any

_import_lock = threading.Lock()
_imported: list[Any] = []  # [paramiko] once its import has finished


def load_paramiko() -> Any:
    """Import paramiko once, without `invoke`: paramiko.config imports it eagerly although
    only `Match exec` in an ssh config uses it, and it costs ~65 ms of CPU (a third of
    paramiko's import). `_lookup` loads it on the first `Match exec` it meets."""
    if _imported:  # not sys.modules: it holds paramiko while another lane is importing it
        return _imported[0]
    with _import_lock:
        if _imported:
            return _imported[0]
        blocked = "invoke" not in sys.modules
        if blocked:
            sys.modules["invoke"] = None  # type: ignore[assignment]  # makes `import` fail fast
        try:
            import paramiko
        finally:
            if blocked and "invoke" in sys.modules and sys.modules["invoke"] is None:
                del sys.modules["invoke"]
        _imported.append(paramiko)
        return paramiko


def quiet_paramiko_logging() -> None:
    """paramiko logs a traceback for errors we already turn into one line; never let it reach
    the operator's terminal through logging's last-resort handler."""
    import logging

    plog = logging.getLogger("paramiko")
    if not plog.handlers:
        plog.addHandler(logging.NullHandler())
