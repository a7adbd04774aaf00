"""A module of this repository as it was at an earlier commit, for benchmarks that run the
code before a change next to the code after it in the same run."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def module_at(rev: str, path: str, name: str) -> types.ModuleType:
    """`path` (relative to the repository) at `rev`, executed as a fresh module `name`. It
    imports today's modules for anything it imports itself."""
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(src, f"{rev}:{path}", "exec"), module.__dict__)
    return module
