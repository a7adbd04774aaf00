"""Entry point. `fleetcheck --version` answers before typer is even imported: it is called
by monitoring and packaging scripts in loops and should cost little more than Python itself.
Start-up runs with the cycle collector off (fleetcheck.collector)."""

from __future__ import annotations

import sys

from fleetcheck import collector


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from fleetcheck import __version__

        print(f"fleetcheck {__version__}")
        sys.exit(0)
    collector.take_over()
    collector.starting()
    try:
        from fleetcheck.cli import main as cli_main
    finally:
        collector.settled()
    try:
        cli_main()
    finally:
        collector.exiting()


if __name__ == "__main__":
    main()
