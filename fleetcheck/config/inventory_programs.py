"""The I/O every inventory source shares: running its program (bounded in time and output, in
its own process group, its stderr kept for the reason) and reading its JSON or saved file."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from fleetcheck.config.inventory import SourceFailed

MAX_OUTPUT = 64 * 1024 * 1024  # an inventory's JSON beyond this is not an inventory


def find_program(name: str) -> str | None:
    """`name` in PATH, else beside this Python (a venv's bin: ansible-core installed there)."""
    if "/" in name:
        return name if os.access(name, os.X_OK) else None
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if os.access(beside, os.X_OK) else None


def run_program(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> bytes:
    """Run argv in its own session; its stdout, or SourceFailed naming the exit status and
    the last line of its stderr. At the timeout the whole process group is killed."""
    exe = find_program(argv[0])
    if exe is None:
        raise SourceFailed(f"{argv[0]}: not found (not in PATH)")
    try:
        proc = subprocess.Popen(
            [exe, *argv[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    except OSError as e:
        raise SourceFailed(f"{argv[0]}: cannot run: {e.strerror or e}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        from fleetcheck.parse.duration import format_duration

        raise SourceFailed(
            f"{argv[0]}: no answer within {format_duration(timeout)} (killed)"
        ) from None
    finally:
        if proc.poll() is None:
            _kill_group(proc)
    if proc.returncode != 0:
        raise SourceFailed(f"{argv[0]}: exited {proc.returncode}{stderr_tail(err)}")
    if len(out) > MAX_OUTPUT:
        raise SourceFailed(f"{argv[0]}: more than {MAX_OUTPUT // (1024 * 1024)} MB of output")
    return out


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
        proc.communicate(timeout=5)


def stderr_tail(err: bytes) -> str:
    """': LAST MEANINGFUL LINE' of a program's stderr (or nothing)."""
    lines = [ln.strip() for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if "ERROR" in ln or "rror" in ln]
    line = (errors or lines or [""])[-1]
    return f": {line[:300]}" if line else " (nothing on stderr)"


def load_json(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SourceFailed(f"{what}: output is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise SourceFailed(
            f"{what}: not JSON (line {e.lineno}, column {e.colno}: {e.msg})"
        ) from None


def read_file(path: str, what: str) -> bytes:
    p = Path(path).expanduser()
    try:
        if p.stat().st_size > MAX_OUTPUT:
            raise SourceFailed(f"{path}: larger than {MAX_OUTPUT // (1024 * 1024)} MB")
        return p.read_bytes()
    except OSError as e:
        raise SourceFailed(f"{what} {path}: cannot read: {e.strerror or e}") from None
