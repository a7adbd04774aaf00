"""Entry point. `fleetcheck --version` answers before typer is even imported: it is called
by monitoring and packaging scripts in loops and should cost little more than Python itself.

The cycle collector and start-up: importing typer, redis-py and our modules allocates some
40,000 objects that live until the process ends, and the collector would walk them again and
again for cycles they cannot be part of (each full pass ~15-20 ms on the benchmark machine; see
docs/performance.md, "Start-up"). So the imports run with it off, and what they made is then
moved out of its reach (`gc.freeze()`) before it is turned back on: a long-running `run
--every` or `serve` collects everything made after start-up as usual. At exit what is left is
frozen too, so the interpreter's final passes do not walk it all once more (objects are
still freed, atexit handlers and finalizers still run; only cycles left among them are not
collected, which Python never promises at exit anyway).
"""

from __future__ import annotations

import gc
import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from fleetcheck import __version__

        print(f"fleetcheck {__version__}")
        sys.exit(0)
    gc.disable()
    try:
        from fleetcheck.cli import main as cli_main
    finally:
        gc.freeze()
        gc.enable()
    try:
        cli_main()
    finally:
        gc.freeze()


if __name__ == "__main__":
    main()
