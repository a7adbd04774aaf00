"""Issue 22 item 16: the lab's subnet picker sees prefixes already on the machine by address
math, not address text. Each case runs in a network namespace of its own (so the covering
prefixes it adds, all inside 198.18.0.0/15, touch no other lab on this machine), on a real
bridge (what the issue saw: a /16 on another bridge; this kernel has no dummy links), deleted
with the namespace in a finally.

test_item16_a_covering_slash15_leaves_no_subnet runs the lab's own `_pick_subnet` inside the
namespace (`ip netns exec`): the code before the fix returned a /24 inside 198.18.0.0/16 (its
text match looked for " 198.18.T." and the /16's address reads 198.18.0.1)."""

from __future__ import annotations

import ipaddress
import secrets
import subprocess
import sys
from collections.abc import Iterator

import pytest

from fleetcheck.lab.system import missing_prerequisites, run

pytestmark = pytest.mark.lab

PICK = (
    "import types\n"
    "from fleetcheck.lab.base import LabBase\n"
    "print(LabBase._pick_subnet(types.SimpleNamespace(prefix={prefix})))\n"
)


@pytest.fixture
def netns() -> Iterator[str]:
    """A namespace with one bridge, up; gone (with its addresses) afterwards."""
    if missing_prerequisites():
        pytest.skip(", ".join(missing_prerequisites()))
    ns = f"fcsubnet{secrets.token_hex(3)}"
    run("ip", "netns", "add", ns)
    try:
        run("ip", "-n", ns, "link", "add", "fcbridge0", "type", "bridge")
        run("ip", "-n", ns, "link", "set", "fcbridge0", "up")
        yield ns
    finally:
        run("ip", "netns", "del", ns, check=False)


def pick_inside(ns: str, prefix: int) -> subprocess.CompletedProcess[str]:
    """The lab's picker as a lab started in `ns` runs it (its `ip` sees that namespace)."""
    return subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", PICK.format(prefix=prefix)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("prefix", [24, 22])
def test_another_lab_holding_a_slash16_moves_the_lab_to_the_other(netns: str, prefix: int) -> None:
    """Issue 43: a bridge carrying 198.18.255.254/16 (another lab's) left "no free 198.18.x.0/24
    subnet"; the picker now looks over the whole 198.18.0.0/15 and lands in 198.19.0.0/16."""
    run("ip", "-n", netns, "addr", "add", "198.18.255.254/16", "dev", "fcbridge0")
    proc = pick_inside(netns, prefix)
    assert proc.returncode == 0, proc.stderr
    picked = ipaddress.IPv4Network(proc.stdout.strip())
    assert picked.prefixlen == prefix
    assert picked.subnet_of(ipaddress.IPv4Network("198.19.0.0/16")), picked


@pytest.mark.parametrize("prefix", [24, 22])
def test_item16_a_covering_slash15_leaves_no_subnet(netns: str, prefix: int) -> None:
    run("ip", "-n", netns, "addr", "add", "198.18.0.1/15", "dev", "fcbridge0")
    proc = pick_inside(netns, prefix)
    assert proc.returncode != 0, f"picked {proc.stdout.strip()} inside 198.18.0.0/15"
    assert f"no free /{prefix} subnet in 198.18.0.0/15 for the lab" in proc.stderr


def test_item16_picks_only_outside_covering_prefixes(netns: str) -> None:
    """198.18.128.0/17 as an address, 198.18.0.0/18 and 198.19.0.0/16 as routes only: every
    pick is in 198.18.64.0/18, the part none covers."""
    from fleetcheck.lab.base import pick_subnet

    run("ip", "-n", netns, "addr", "add", "198.18.128.1/17", "dev", "fcbridge0")
    run("ip", "-n", netns, "route", "add", "198.18.0.0/18", "dev", "fcbridge0")
    run("ip", "-n", netns, "route", "add", "198.19.0.0/16", "dev", "fcbridge0")
    free = ipaddress.IPv4Network("198.18.64.0/18")
    for prefix in (24, 22):
        picks = {pick_subnet(prefix, ns=netns) for _ in range(60)}
        assert all(p.subnet_of(free) for p in picks), sorted(map(str, picks))
        assert len(picks) > 1  # still random among the free ones
    inside = pick_inside(netns, 24)
    assert inside.returncode == 0, inside.stderr
    assert ipaddress.IPv4Network(inside.stdout.strip()).subnet_of(free)


def test_item16_an_unrelated_prefix_costs_nothing(netns: str) -> None:
    run("ip", "-n", netns, "addr", "add", "198.19.0.1/16", "dev", "fcbridge0")  # the other half
    assert pick_inside(netns, 24).returncode == 0
