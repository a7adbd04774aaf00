"""Running the real CLI from tests: one place for the subprocess call."""

from __future__ import annotations

import os
import subprocess
import sys


def fleetcheck(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python -m fleetcheck ARGS` with this interpreter; `env` adds to the environment."""
    return subprocess.run(
        [sys.executable, "-m", "fleetcheck", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
