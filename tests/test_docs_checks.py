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


def test_the_index_lists_every_check_as_declared() -> None:
    """docs/checks.md's index (name, where it runs, `description`) is generated from the
    declarations: a new check missing from it, or a description changed, fails here."""
    from tests import catalog

    text = REFERENCE.read_text()
    assert catalog.INDEX_START in text, "docs/checks.md: no index (python -m tests.catalog)"
    shown = set(re.findall(r"^\| `(\w+)` \|", text.split(catalog.INDEX_START)[1], re.M))
    missing = sorted(set(registry.builtins()) - shown)
    assert missing == [], (
        f"docs/checks.md's index does not list {missing}: run `python -m tests.catalog` "
        "in the clone (it writes each check's declared description)"
    )
    assert catalog.with_index(text, catalog.checks_index(registry.builtins())) == text, (
        "docs/checks.md's index differs from the checks' declarations: run "
        "`python -m tests.catalog`"
    )


def test_the_documented_acl_is_every_declared_command() -> None:
    """docs/brokers.md's least-privilege user grants exactly the commands the checks of
    hosts.example.toml declare (`broker_commands`) and the connection's, and writes on exactly
    the keys their writing commands name: a check's new command missing from it fails here,
    naming it (tests/test_broker_server.py patrols as that user, tests/test_doctor.py holds
    the declarations to what MONITOR sees)."""
    from tests import catalog

    brokers = (ROOT / "docs" / "brokers.md").read_text()
    line = re.search(r"^ACL SETUSER .*$", brokers.split(catalog.ACL_MARK, 1)[1], re.M)
    assert line is not None, f"docs/brokers.md: no ACL SETUSER line after {catalog.ACL_MARK}"
    derived = catalog.patrol_acl((ROOT / "hosts.example.toml").read_text()).split()
    documented = line.group(0).split()
    for kind, mark in (("commands", "+"), ("key patterns", "~")):
        want = {w for w in derived if w.startswith(mark)}
        have = {w for w in documented if w.startswith(mark)}
        assert want <= have, (
            f"docs/brokers.md's ACL lacks {sorted(want - have)} that the checks declare: "
            "run `python -m tests.catalog`"
        )
        assert have <= want, (
            f"docs/brokers.md's ACL grants {kind} {sorted(have - want)} no check declares"
        )
    assert documented == derived, "docs/brokers.md's ACL line: run `python -m tests.catalog`"
