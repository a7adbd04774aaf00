"""hosts.example.toml against the checks' declarations (Datadog's spec -> example): each check
table it shows is its check's declared `example` word for word, and every registered check's
example (with its per-host keys in a host table) loads through the real validator and names
every key its config types have. A failure names the check, the declaration and its file."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from fleetcheck.config import load
from fleetcheck.core import registry
from tests.test_check_contract import home_of

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "hosts.example.toml"
CHECKS_START = "# A check runs when"


def shown_tables() -> dict[str, str]:
    """{check name: its block (comments before it included)} as hosts.example.toml shows it."""
    text = EXAMPLE.read_text()
    blocks = text[text.index(CHECKS_START) :].split("\n\n")[1:]
    out = {}
    for block in blocks:
        m = re.search(r"^\[checks\.(\w+)\]", block, re.M)
        assert m, f"hosts.example.toml: a block after {CHECKS_START!r} is no check table: {block!r}"
        out[m.group(1)] = block.strip("\n") + "\n"
    return out


def keys_in(toml_text: str) -> set[str]:
    """Every key the text sets or shows commented out (`# key = ...`, `{ key = ...`)."""
    return set(re.findall(r"(?:^|[#{,]\s*)([a-z_]+)\s*=", toml_text, re.M))


def test_every_check_table_shown_is_its_declaration() -> None:
    checks = registry.available()
    for name, block in shown_tables().items():
        assert name in checks, f"hosts.example.toml shows [checks.{name}]: no such check"
        assert block == checks[name].example, (
            f"{name}: hosts.example.toml's [checks.{name}] differs from the `example` declared "
            f"in {home_of(checks[name])}: keep them the same text"
        )


def test_every_registered_check_is_shown() -> None:
    """A check not in hosts.example.toml (a new one) fails here until the file is generated
    again from the declarations (`python -m tests.catalog`, which adds its `example`)."""
    from tests import catalog

    missing = sorted(set(registry.builtins()) - set(shown_tables()))
    assert missing == [], (
        f"hosts.example.toml does not show [checks.{missing[0]}] "
        f"(missing: {', '.join(missing)}): run `python -m tests.catalog` in the clone to "
        "add each check's declared `example`"
    )
    assert catalog.example_config(EXAMPLE.read_text(), registry.builtins()) == (
        EXAMPLE.read_text()
    ), "hosts.example.toml: its check tables differ from the declarations: run " \
        "`python -m tests.catalog`"  # fmt: skip


@pytest.mark.parametrize("name", sorted(registry.available()))
def test_every_declared_example_loads_and_names_every_key(name: str, tmp_path: Path) -> None:
    check = registry.available()[name]
    text = EXAMPLE.read_text()
    text = text[: text.index(CHECKS_START)]
    host = '[[hosts]]\nname = "example"\nssh = "local"\n' + check.host_example + "\n"
    path = tmp_path / "hosts.toml"
    path.write_text(text + host + check.example)
    fleet = load(path, registry.config_type, registry.host_config_types)
    assert name in fleet.checks
    for kind, declared, type_ in (
        ("example", check.example, check.config_type),
        ("host_example", check.host_example, check.host_config_type),
    ):
        fields = {f.name for f in dataclasses.fields(type_)} if type_ is not None else set()
        missing = sorted(fields - keys_in(declared))
        assert missing == [], f"{name}: its `{kind}` in {home_of(check)} does not show {missing}"
