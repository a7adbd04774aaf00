"""Every message the docs quote is one the program prints.

In README.md and docs/*.md, the code spans between `<!-- messages -->` and `<!-- /messages -->`
are messages fleetcheck prints (row summaries, errors, warnings). A quoted message writes what
varies as a placeholder: an upper-case word (`ADDR`, `FILE`, `N`), `...` or `<why>`. Everything
else, its literal text, must be in the program: each literal piece of the message occurs in a
string of fleetcheck's source (f-strings and concatenations read through `ast`, so a message
split over several source lines still counts as one). A message whose words come partly from a
library is also produced by a real run below (an encrypted key, through sshd in the lab); the
OS's own error texts (`Permission denied`) count as the program's.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from tests.lab import Lab

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = [*sorted((ROOT / "fleetcheck").rglob("*.py")), *sorted((ROOT / "checks").rglob("*.py"))]

REGION = re.compile(r"<!-- messages -->(.*?)<!-- /messages -->", re.S)
SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
PLACEHOLDER = re.compile(r"\.\.\.|…|<[^<>]*>|\b[A-Z][A-Z0-9_]*\b")
HOLE = "\x00"


def quoted_messages() -> list[tuple[str, str]]:
    """(document, message) for every code span inside a messages region."""
    found = []
    for doc in DOCS:
        for region in REGION.findall(doc.read_text()):
            for span in SPAN.findall(region):
                found.append((doc.relative_to(ROOT).as_posix(), " ".join(span.split())))
    return found


def pieces(message: str) -> list[str]:
    """The literal text of a quoted message: what lies between its placeholders, trimmed of
    the punctuation around placeholders, kept when it holds at least three letters or digits."""
    out = []
    for chunk in PLACEHOLDER.split(message):
        chunk = chunk.strip(" :;,.()[]'\"/=")
        if sum(c.isalnum() for c in chunk) >= 3:
            out.append(chunk)
    return out


def _template(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else HOLE
            for v in node.values
        )
    return None


@cache
def source_templates() -> tuple[tuple[str, ...], ...]:
    """Every string in the source as its literal parts: f-string fields and `{}`/`%` formats
    are the holes between them (`f"the journal{d} is empty"`: ("the journal", " is empty"))."""
    found: list[tuple[str, ...]] = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
                continue  # its operands are visited on their own
            text = _template(node)
            if text is None:
                continue
            text = re.sub(r"\{[^{}]*\}|%[-#0 +]*\d*(?:\.\d+)?[sdrfgx]", HOLE, text)
            if len(text) > 400:
                continue  # a docstring or a script, not a message
            parts = [re.sub(r"\s+", " ", part) for part in text.split(HOLE)]
            # adjacent fields are one hole: f"{a}{b}" has no literal between them
            merged = [parts[0], *[p for p in parts[1:-1] if p], *parts[1:][-1:]]
            found.append(tuple(merged))
    return tuple(found)


@cache
def source_literals() -> tuple[str, ...]:
    return tuple(part for template in source_templates() for part in template)


def _one_hole(piece: str, left: str, right: str) -> str | None:
    """`piece` as a suffix of `left`, a hole, a prefix of `right`: the smallest hole, or None."""
    i = max(n for n in range(len(piece) + 1) if left.endswith(piece[:n]))
    for j in range(i, len(piece) + 1):
        if right.startswith(piece[j:]):
            return piece[i:j]
    return None  # unreachable: the empty tail is a prefix of anything


def across_holes(piece: str) -> bool:
    """Whether `piece` is part of some string of the source with its holes filled: it starts in
    one literal part and ends in the next or the one after, what lies between being a hole's
    value (an example value the docs show, nested text of the source, or nothing). At most a
    third of the piece may be such example values."""
    words = piece.split()
    if len(words) < 2:
        return False
    budget = len(piece) // 3
    for parts in source_templates():
        if len(parts) < 2:
            continue
        text = " ".join(parts)
        if words[0] not in text and words[-1] not in text:
            continue
        for k in range(len(parts) - 1):
            hole = _one_hole(piece, parts[k], parts[k + 1])
            if hole is not None and _cost(hole) <= budget:
                return True
            if k + 2 < len(parts) and len(parts[k + 1]) >= 3:
                middle = parts[k + 1]
                at = piece.find(middle)
                while at >= 0:
                    a = _one_hole(piece[:at], parts[k], "")
                    b = _one_hole(piece[at + len(middle) :], "", parts[k + 2])
                    if a is not None and b is not None and _cost(a) + _cost(b) <= budget:
                        return True
                    at = piece.find(middle, at + 1)
    return False


def _foreign(filling: str) -> bool:
    """A hole's filling that is not itself a string of the source (a nested f-string's text,
    such as `f"journal {place} not found"` with `place = f"directory {d}"`, is the source's)."""
    text = filling.strip()
    return not (len(text) >= 3 and text in stripped_literals())


@cache
def stripped_literals() -> frozenset[str]:
    return frozenset(lit.strip() for lit in source_literals())


def _cost(filling: str) -> int:
    return len(filling) if _foreign(filling) else 0


def os_messages() -> tuple[str, ...]:
    """What the OS says for each errno (`Permission denied`): quoted as the OS prints it."""
    return tuple(os.strerror(n) for n in range(1, 134))


def missing_pieces(message: str) -> list[str]:
    """The literal pieces of `message` found in no string of the program. A message built
    from parts (`f"{where}: {reason}"`, `text += " (detail)"`) is checked part by part at
    its `: ` and ` (` joints."""
    literals = source_literals() + os_messages()

    def known(text: str) -> bool:
        return any(text in lit for lit in literals)

    missing = []
    for piece in pieces(message):
        if known(piece) or across_holes(piece):
            continue
        parts = [p.strip(" :;,.()[]'\"/=") for p in re.split(r": | \(", piece)]
        if len(parts) > 1 and all(known(p) for p in parts if sum(c.isalnum() for c in p) >= 3):
            continue
        missing.append(piece)
    return missing


def test_docs_quote_messages() -> None:
    """The marking is in use (a test over nothing would pass forever)."""
    docs = {doc for doc, _ in quoted_messages()}
    assert len(quoted_messages()) >= 30 and {"docs/ssh.md", "docs/checks.md"} <= docs


@pytest.mark.parametrize("doc, message", quoted_messages())
def test_quoted_message_is_in_the_program(doc: str, message: str) -> None:
    assert pieces(message), f"{doc}: `{message}` has no literal text to check"
    assert missing_pieces(message) == [], f"{doc}: `{message}`"


@pytest.mark.parametrize(
    "message",
    [
        "encrypted key (load into agent)",  # the wording drifted
        "IDENTITY: key is encrypted",
        "host key changed for ADDR: possible attacker in the middle",
    ],
)
def test_a_message_the_program_does_not_print_is_caught(message: str) -> None:
    assert missing_pieces(message) != []


def test_placeholders() -> None:
    assert pieces("timed out after T connecting to ADDR:PORT") == [
        "timed out after",
        "connecting to",
    ]
    assert pieces("cannot resolve NAME: ...") == ["cannot resolve"]
    assert pieces("broker HOST:PORT unreachable: <why>") == ["broker", "unreachable"]


def test_a_piece_may_span_a_hole() -> None:
    """`f"the journal{where_dir} is empty (no entries at all)..."` prints, with no directory,
    the text the docs quote; a hole may hold a short example value, never most of the text."""
    assert missing_pieces("the journal is empty (no entries at all)") == []
    assert missing_pieces("the journal /var/log/journal is empty (no entries at all)") == []
    assert missing_pieces("the journal: nothing of this sentence is in the program") != []


# ------------------------------------------------------------------ real runs
def as_regex(message: str) -> re.Pattern[str]:
    """A quoted message as a pattern over what the program printed: placeholders match text."""
    parts = PLACEHOLDER.split(message)
    return re.compile(".+?".join(re.escape(p) for p in parts))


@pytest.mark.lab
def test_encrypted_key_message_from_a_real_patrol(lab: Lab, tmp_path: Path) -> None:
    """The key error the docs quote, from a patrol whose only key is passphrase-protected
    (paramiko hands such keys to cryptography, whose own error says so only in prose)."""
    quoted = [m for _, m in quoted_messages() if "encrypted (load it into the agent)" in m]
    assert quoted, "docs/ssh.md no longer quotes the encrypted-key message"
    host = lab.add_host("enc")
    lab.trust(host)
    for kind in ("ed25519", "ecdsa", "rsa"):
        key = tmp_path / f"id_{kind}"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", kind, "-N", "a passphrase", "-f", str(key)],
            check=True,
            timeout=60,
        )
        text = lab.config(checks="[checks.routes]\n").read_text()
        config = tmp_path / f"{kind}.toml"
        config.write_text(text.replace(str(lab.client_key), str(key)))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "fleetcheck",
                "run",
                "-c",
                config,
                "--no-state",
                "--format",
                "plain",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 3, proc.stdout + proc.stderr
        said = " ".join(proc.stdout.split())  # plain wraps its summaries to the width
        for message in quoted:
            assert as_regex(message).search(said), (kind, message, proc.stdout)
