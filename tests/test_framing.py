"""The gathered exec's framing parser: same fragments as the original regex on honest
output, and linear on hostile output (a fragment printing the markers it can see)."""

from __future__ import annotations

import re
import time

import pytest

from fleetcheck.core.context import HostFacts
from fleetcheck.parse.gathered import Fragment, parse_gathered
from fleetcheck.transport.gather import build_gather_script

NONCE = "0123456789abcdef"


def regex_reference(nonce: str, out: bytes) -> dict[str, Fragment]:
    """The former parser (quadratic on repeated begin markers), kept as the oracle."""
    n = re.escape(nonce.encode())
    pattern = rb"@@" + n + rb" begin (\S+)\n(.*?)\n@@" + n + rb" end \1 (\d+)\n"
    return {
        m.group(1).decode(): Fragment(rc=int(m.group(3)), output=m.group(2))
        for m in re.finditer(pattern, out, re.S)
    }


def framed(parts: list[tuple[str, bytes, int]]) -> bytes:
    out = f"@@{NONCE} clock 1700000000.5\n".encode()
    for key, body, rc in parts:
        out += f"@@{NONCE} begin {key}\n".encode() + body
        out += f"\n@@{NONCE} end {key} {rc}\n".encode()
    return out


@pytest.mark.parametrize(
    "parts",
    [
        [("a.x", b"hello", 0)],
        [("a.x", b"", 0), ("b.y", b"two\nlines", 3)],
        [("a.x", b"@@" + NONCE.encode() + b" begin fake\n", 0), ("b.y", b"ok", 0)],
        [("a.x", b"no newline at end", 1), ("c", b"\n\n", 2)],
        [("a.x", b"@@ffff end a.x 0\n", 0)],  # another nonce: plain text
    ],
)
def test_honest_output_frames_like_the_regex(parts: list[tuple[str, bytes, int]]) -> None:
    out = framed(parts)
    ours, epoch = parse_gathered(NONCE, out)
    assert ours == regex_reference(NONCE, out)
    assert epoch == 1700000000.5


def test_truncated_fragment_is_missing_and_the_rest_kept() -> None:
    out = framed([("a.x", b"ok", 0)]) + f"@@{NONCE} begin b.y\npartial".encode()
    ours, _ = parse_gathered(NONCE, out)
    assert ours == {"a.x": Fragment(0, b"ok")}


def test_the_script_and_parser_agree() -> None:
    script = build_gather_script(NONCE, {"a.x": "echo hi", "b.y": "exit 4"})
    assert script.count(f"@@{NONCE} begin") == 2


def test_hostile_output_is_framed_in_linear_time() -> None:
    """8 MiB of begin markers: the regex took ~11 s for 256 KB (quadratic, so hours for
    8 MiB); one pass takes a fraction of a second. The bound is 30x that, a complexity
    guard rather than a timing (bench numbers are in the README)."""
    hostile = (f"@@{NONCE} begin a.x\n".encode()) * (8 * 1024 * 1024 // 27)
    out = framed([("a.x", hostile, 0)])
    assert len(out) >= 8 * 1024 * 1024
    start = time.process_time()
    ours, _ = parse_gathered(NONCE, out)
    took = time.process_time() - start
    assert ours["a.x"].output == hostile
    assert took < 10, f"hung: {took:.1f} s of CPU framing 8 MiB (quadratic again?)"


@pytest.mark.parametrize(
    ("remote", "local", "resolution", "skew"),
    [
        (1000.25, 1000.0, 0.0, 0.25),  # a clock with a fraction: the plain difference
        (999.75, 1000.0, 0.0, -0.25),
        (1000.0, 1000.6, 1.0, 0.0),  # whole seconds: 1000 means 1000.0-1000.999...: agrees
        (1000.0, 1000.0, 1.0, 0.0),
        (1003.0, 1000.5, 1.0, 2.5),  # ahead: the least it can be
        (997.0, 1000.5, 1.0, -2.5),  # behind: 997.999... at the most, so 2.5s behind at least
    ],
)
def test_clock_skew_within_the_host_clock_resolution(
    remote: float, local: float, resolution: float, skew: float
) -> None:
    facts = HostFacts({}, remote, local, None, remote_resolution_s=resolution)
    assert facts.clock_skew_s == pytest.approx(skew)
