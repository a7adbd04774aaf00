"""The commands the built-in checks add to the CLI, as `fleetcheck --help` lists them: name,
help and the module that declares each, read from the checks' source text. Kept apart from
the registry, which imports the check contract and the model: `--help` imports neither, nor
any check. The declarations themselves are `CheckCommand`s (fleetcheck.core.check); the registry's
`check_command` imports the one module that declares a name, and a test holds this listing
to the declarations.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

# CheckCommand(name="...", help="..." "..." ...): keywords first, plain string literals
_COMMAND = re.compile(
    r'CheckCommand\(\s*name="([a-z][a-z0-9-]*)",\s*help=\(?((?:\s*"(?:[^"\\\n]|\\.)*")+)'
)
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


@cache
def command_listing() -> dict[str, tuple[str, str]]:
    """{command name: (help, module)} of the commands the built-in checks declare, in their
    module or in their package's `command` or `check` module. A plugin's commands are found
    by name only (reading the entry points would cost every `--help` tens of milliseconds)."""
    import fleetcheck.checks as package

    found: dict[str, tuple[str, str]] = {}
    for path in sorted(Path(package.__path__[0]).iterdir()):
        name = path.name.removesuffix(".py")
        if name.startswith("_") or not name.isidentifier():
            continue
        sources = [(path, name)] if path.suffix == ".py" else []
        if (path / "__init__.py").is_file():
            sources = [(path / "__init__.py", name), (path / "command.py", f"{name}.command")]
            sources.append((path / "check.py", f"{name}.check"))
        for source, module in sources:
            text = source.read_text(encoding="utf-8") if source.is_file() else ""
            for command, literals in _COMMAND.findall(text):
                raw = "".join(_LITERAL.findall(literals))
                help_text = raw.encode().decode("unicode_escape")
                found[command] = (help_text, f"{package.__name__}.{module}")
    return found
