"""doctor, discover and the generated docs serve every check from its declarations
(`broker_commands`, `discover_draft`, `example`, `description`) and name none: no string in
those modules is a check's name or its `[checks.NAME]` table, and no config is looked up by a
check's name (`fleet.checks.get("NAME")`, `fleet.checks["NAME"]`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fleetcheck.core import registry

ROOT = Path(__file__).resolve().parent.parent
MODULES = [
    "fleetcheck/doctor.py",
    "fleetcheck/discover.py",
    "fleetcheck/discover_hosts.py",
    "tests/catalog.py",
    "fleetcheck/core/discovery.py",
    "fleetcheck/core/hostfacts.py",
]


def named_checks(source: str, names: set[str]) -> list[str]:
    """The string constants of `source` that name one of `names` (as a whole, or as
    `checks.NAME`), with their line."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    out = []
    for node in ast.walk(tree):
        if id(node) in docstrings:
            continue  # prose may give an example
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text in names or any(f"checks.{n}" in text for n in names):
                out.append(f"line {node.lineno}: {text!r}")
    return out


def test_the_finder_finds_a_named_check() -> None:
    source = '"""About queue_depth."""\nif name == "queue_depth":\n'
    source += '    x = "[checks.live_hash]"\ny = "a broker"\n'
    assert named_checks(source, {"queue_depth", "live_hash", "broker"}) == [
        "line 2: 'queue_depth'",
        "line 3: '[checks.live_hash]'",
    ]


@pytest.mark.parametrize("module", MODULES)
def test_module_names_no_check(module: str) -> None:
    found = named_checks((ROOT / module).read_text(), set(registry.available()))
    assert found == [], f"{module} names checks (declare it in the check instead): {found}"
