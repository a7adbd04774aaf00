"""docs/checks.md's check reference against the declarations: every section names a registered
check and every key of that check's config types (`[checks.NAME]` and per host). A check
without a section there (a new one, written as one file) documents its keys in its module's
docstring instead, so its own file is its reference until docs/checks.md grows a section."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from pathlib import Path

import pytest

from fleetcheck.core import registry

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "checks.md"


def sections() -> dict[str, str]:
    """{check name: its `### `NAME`` section's text}."""
    text = REFERENCE.read_text()
    parts = re.split(r"^### `(\w+)`", text, flags=re.M)
    return {parts[i]: parts[i + 1].split("\n## ")[0] for i in range(1, len(parts), 2)}


def keys_of(check: object) -> set[str]:
    out: set[str] = set()
    for type_ in (check.config_type, check.host_config_type):  # type: ignore[attr-defined]
        if type_ is not None:
            out |= {f.name for f in dataclasses.fields(type_)}
    return out


def test_every_section_names_a_registered_check() -> None:
    assert set(sections()) <= set(registry.available()), "docs/checks.md: sections of no check"


@pytest.mark.parametrize("name", sorted(registry.available()))
def test_every_key_of_every_check_is_documented(name: str) -> None:
    check = registry.available()[name]
    section = sections().get(name)
    module = inspect.getmodule(type(check))
    assert module is not None
    if module.__name__.endswith(".check"):  # a package's check: its docstring is the package's
        module = importlib.import_module(module.__name__.removesuffix(".check"))
    where = "docs/checks.md" if section is not None else f"the docstring of {module.__file__}"
    text = section if section is not None else module.__doc__ or ""
    documented = {w for span in re.findall(r"`([^`]+)`", text) for w in re.findall(r"\w+", span)}
    missing = sorted(keys_of(check) - documented)
    assert missing == [], f"{name}: keys not documented (as `key`) in {where}: {missing}"
