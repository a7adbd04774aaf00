"""Entry point. `fleetcheck --version` answers before typer is even imported: it is called
by monitoring and packaging scripts in loops and should cost little more than Python itself."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from fleetcheck import __version__

        print(f"fleetcheck {__version__}")
        sys.exit(0)
    from fleetcheck.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
