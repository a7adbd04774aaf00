"""The parts of the docs that are the checks' declarations, generated from them.

- hosts.example.toml: its check tables are each check's `example`, word for word (a check the
  file shows keeps its place; a check it does not show yet is added at the end).
- docs/checks.md: the index of every check (name, where it runs, `description`) between
  `<!-- checks:index -->` and `<!-- /checks:index -->`.
- docs/brokers.md: the least-privilege ACL user (`<!-- acl:patrol -->`): every command the
  checks declare (`Check.broker_commands`) for the fleet of hosts.example.toml, reads on every
  key, writes on the keys the writing commands name.

`python -m tests.catalog` rewrites the three files in the current directory (a clone);
`--check` only says which differ (exit 1). Only the built-in checks (fleetcheck.checks): a
third-party check documents itself. tests/test_example_config.py and
tests/test_docs_checks.py hold the files to what this generates, so a new check cannot be
missing from any of them.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from fleetcheck.core.check import Check, Scope

CHECKS_START = "# A check runs when"
INDEX_START = "<!-- checks:index -->"
INDEX_END = "<!-- /checks:index -->"
ACL_MARK = "<!-- acl:patrol -->"
# what the ACL grants beyond the checks' own commands: every connection names itself (CLIENT
# SETNAME), says HELLO with protocol = 3 and SELECTs a database other than 0; doctor queues the
# commands inside a MULTI it DISCARDs (PING is the connection's too: doctor asks it itself)
WHERE = {Scope.BROKER: "the broker", Scope.HOST: "each host (SSH)"}
FRAMEWORK_COMMANDS = ("client|setname", "hello", "select", "multi", "exec", "discard")


def example_config(text: str, checks: dict[str, Check]) -> str:
    """hosts.example.toml's text with every check table its check's `example`."""
    head, _, rest = text.partition(CHECKS_START)
    intro, *blocks = rest.split("\n\n")
    shown: list[str] = []
    for block in blocks:
        m = re.search(r"^\[checks\.(\w+)\]", block, re.M)
        if m and m.group(1) in checks and m.group(1) not in shown:
            shown.append(m.group(1))
    names = shown + sorted(n for n in checks if n not in shown)
    tables = [checks[n].example.strip("\n") for n in names]
    return head + CHECKS_START + "\n\n".join([intro, *tables]) + "\n"


def checks_index(checks: dict[str, Check]) -> str:
    """docs/checks.md's index block (its markers included)."""
    rows = [
        f"| `{name}` | {WHERE[c.scope]} | {c.description.replace('|', '/')} |"
        for name, c in sorted(checks.items())
    ]
    return "\n".join(
        [
            INDEX_START,
            "| check | looks at | what it judges |",
            "| --- | --- | --- |",
            *rows,
            INDEX_END,
        ]
    )


def patrol_acl(example: str) -> str:
    """The ACL SETUSER line for a patrol of the fleet in `example` (hosts.example.toml's
    text) with every check it configures."""
    from fleetcheck import doctor
    from fleetcheck.config import load
    from fleetcheck.core import registry

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hosts.toml"
        path.write_text(example)
        fleet = load(path, registry.config_type, registry.host_config_types)
    needs = doctor.broker_needs(fleet)
    commands = list(dict.fromkeys([n.name for n in needs] + list(FRAMEWORK_COMMANDS)))
    written = list(dict.fromkeys(k for n in needs if n.writes for k in n.keys))
    return " ".join(
        [
            "ACL SETUSER fleetcheck on >PASSWORD resetkeys %R~*",
            *(f"~{k}" for k in written),
            "resetchannels -@all",
            *(f"+{c}" for c in commands),
        ]
    )


def with_acl(text: str, line: str) -> str:
    """docs/brokers.md's text with `line` as the ACL after its marker."""
    before, _, after = text.partition(ACL_MARK)
    return before + ACL_MARK + re.sub(r"^ACL SETUSER .*$", line, after, count=1, flags=re.M)


def with_index(text: str, block: str) -> str:
    """docs/checks.md's text with `block` as its index (added after the first paragraph)."""
    if INDEX_START in text:
        before, _, rest = text.partition(INDEX_START)
        return before + block + rest.partition(INDEX_END)[2]
    title, _, rest = text.partition("\n\n")
    para, _, rest = rest.partition("\n\n")
    return f"{title}\n\n{para}\n\n{block}\n\n{rest}"


def generated(root: Path, checks: dict[str, Check]) -> dict[str, str]:
    """{relative path: the text it should have} for the three files under `root`."""
    example = example_config((root / "hosts.example.toml").read_text(), checks)
    return {
        "hosts.example.toml": example,
        "docs/checks.md": with_index((root / "docs/checks.md").read_text(), checks_index(checks)),
        "docs/brokers.md": with_acl((root / "docs/brokers.md").read_text(), patrol_acl(example)),
    }


def main(argv: list[str]) -> int:
    from fleetcheck.core import registry

    root = Path.cwd()
    differ = []
    for name, text in generated(root, registry.builtins()).items():
        if (root / name).read_text() != text:
            differ.append(name)
            if "--check" not in argv:
                (root / name).write_text(text)
    verb = "differ from the checks' declarations" if "--check" in argv else "rewritten"
    print(f"{', '.join(differ)}: {verb}" if differ else "up to date")
    return 1 if differ and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
