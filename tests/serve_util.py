"""Starting `fleetcheck serve` for a test, and small HTTP helpers (loopback only)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import Message
from pathlib import Path

from fleetcheck.core.model import Report, Result, Status


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`fleetcheck serve --listen 127.0.0.1:0 ARGS`; yields its base URL; stopped after."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleetcheck", "serve", "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("fleetcheck serve: http://"):
            proc.kill()
            raise AssertionError(f"serve did not start: {line!r} {proc.communicate()[1]!r}")
        yield line.split()[2].rstrip("/")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def get(
    url: str, headers: dict[str, str] | None = None, method: str = "GET", data: bytes | None = None
) -> tuple[int, Message, bytes]:
    """Status, headers (looked up case-insensitively, as HTTP names them) and body."""
    req = urllib.request.Request(url, headers=headers or {}, method=method, data=data)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def basic(user_pass: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(user_pass.encode()).decode()}


def write_config(path: Path, every: str = "15m", extra: str = "") -> Path:
    """A config for a console that only reads files (its broker is never contacted)."""
    path.write_text(
        '[broker]\nurl = "redis://127.0.0.1:1/0"\n\n'
        f'[patrol]\nevery = "{every}"\n\n'
        '[[hosts]]\nname = "n8"\nssh = "local"\naddrs = ["127.0.0.10"]\n'
        'tz = "UTC"\nlogs = [{ path = "/var/log/worker.log", max_age = "10m" }]\n'
        + extra
        + "\n[checks.clients]\n"
    )
    return path


HOSTILE = '<script>console.error("pwned")</script><img src=x onerror="console.error(1)">'


def report(started_at: str, status: Status = Status.CRIT, hostile: str = HOSTILE) -> Report:
    """A round as a patrol would record it, with log content in its summary and evidence."""
    return Report(
        started_at,
        0.5,
        (
            Result(
                "queue_depth",
                None,
                Status.CRIT if status is Status.CRIT else Status.OK,
                "depth 167 > cap 100",
                metrics={"depth": 167 if status is Status.CRIT else 20},
                limits={"cap": 100},
            ),
            Result(
                "clients",
                "n8",
                Status.OK,
                "n8: 12 connections",
                metrics={"connections": 12, "by_addr": {"127.0.0.10": 12}, "min_clients": 1},
            ),
            Result(
                "logs",
                "n8",
                status,
                f"/var/log/worker.log: last line {hostile}",
                metrics={"age_s": 9000.0, "logs": {"/var/log/worker.log": {"age_s": 9000.0}}},
                evidence={"logs": [{"path": "/var/log/worker.log", "last_line": hostile}]},
            ),
        ),
    )
