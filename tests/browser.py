"""A real browser for the console tests: Debian's headless Chromium.

`load(url)` returns the DOM after the page loaded (scripts, had any run, included) and every
console message Chromium logged while loading it (`--enable-logging=stderr` writes each one as
`INFO:CONSOLE`, CSP violations included). Our pages carry no script, so any console message is
a defect. The tests also prove that this detector sees a console error and a running script.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass(frozen=True)
class Page:
    dom: str
    console: list[str]  # one line per console message


def _run(args: list[str], timeout: float = 90) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM, "chromium is not installed (apt-get install chromium)"
    with tempfile.TemporaryDirectory(prefix="fleetcheck-chromium-") as profile:
        return subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",  # we run as root
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--enable-logging=stderr",
                "--v=0",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def load(url: str) -> Page:
    proc = _run(["--dump-dom", url])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return Page(proc.stdout, console_lines(proc.stderr))


def screenshot(url: str, path: Path, width: int = 1280, height: int = 1000) -> list[str]:
    """Save a PNG of the page; returns the console messages seen while loading it."""
    proc = _run(
        [f"--window-size={width},{height}", "--hide-scrollbars", f"--screenshot={path}", url]
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    return console_lines(proc.stderr)
