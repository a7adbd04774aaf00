"""A lab's id names everything it makes (bridge `fcbr<id>`, veths `fv<id>…`, namespaces
`fc<id>-…`, its registry entry). Four hex digits drawn at random repeat within one CI run,
and a repeat next to a lab or a namespace still alive failed a test with "RTNETLINK answers:
File exists". `claim_lab_id` skips every id whose names are in use on the machine and takes
the one it returns by creating the registry entry exclusively.

Each case feeds the picker a fixed sequence of draws and occupies the first one by a real
name (a link in the root namespace, a namespace, a registry entry), removed in a finally."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from fleetcheck.lab import system
from fleetcheck.lab.system import REGISTRY, claim_lab_id, missing_prerequisites, run

pytestmark = pytest.mark.lab


def _unused_pair() -> tuple[str, str]:
    """Two ids that nothing on this machine holds now (the case occupies the first)."""
    found: list[str] = []
    for n in range(0xFFFF, 0, -1):
        lab_id = f"{n:04x}"
        if not (REGISTRY / lab_id).exists():
            found.append(lab_id)
        if len(found) == 2:
            return found[0], found[1]
    raise AssertionError("no free ids")


@pytest.fixture
def draws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    if missing_prerequisites():
        pytest.skip("needs network namespaces (root)")
    taken, free = _unused_pair()
    sequence = iter([taken, free])
    monkeypatch.setattr(system.secrets, "token_hex", lambda n: next(sequence))
    yield taken, free
    (REGISTRY / free).unlink(missing_ok=True)


def test_an_id_whose_veth_name_exists_is_skipped(draws: tuple[str, str]) -> None:
    taken, free = draws
    link = f"fv{taken}000"  # a bridge by the name a veth of that lab would have
    run("ip", "link", "add", link, "type", "bridge")
    try:
        assert claim_lab_id(os.getpid()) == free
        assert not (REGISTRY / taken).exists()
    finally:
        run("ip", "link", "del", link, check=False)


def test_an_id_whose_namespace_exists_is_skipped(draws: tuple[str, str]) -> None:
    taken, free = draws
    ns = f"fc{taken}-w"
    run("ip", "netns", "add", ns)
    try:
        assert claim_lab_id(os.getpid()) == free
    finally:
        run("ip", "netns", "del", ns, check=False)


def test_an_id_another_lab_registered_is_skipped_and_kept(draws: tuple[str, str]) -> None:
    taken, free = draws
    REGISTRY.mkdir(parents=True, exist_ok=True)
    entry = REGISTRY / taken
    entry.write_text(json.dumps({"owner": os.getpid(), "namespaces": []}))
    try:
        assert claim_lab_id(os.getpid()) == free
        assert json.loads(entry.read_text())["namespaces"] == []  # the other lab's, untouched
        assert json.loads((REGISTRY / free).read_text()) == {"owner": os.getpid()}
    finally:
        entry.unlink(missing_ok=True)
