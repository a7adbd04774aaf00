"""The framework names no check (issue 43): a check's own declarations are the only place it
is known, so a check added as one file is served by every part of `fleetcheck/` (the console's
charts, `explain`, peers, correlate) and a check removed leaves nothing behind.

Every module under `fleetcheck/` is parsed with `ast` (nothing is imported but the registry,
for the names) and none may
- (a) hold a string constant equal to a registered check's name ("logs", "clients", ...),
- (b) import `fleetcheck.checks.NAME` (an `import`, a `from` import, or the module's name as
  a string, as `importlib.import_module` takes it),
- (c) look a check up by its name in the config (`fleet.checks["logs"]`, `.get("logs")`,
  `config.checks.logs`).

A word that is legitimately something else (a host's name, a config table that is not a
check's) is allowed only where `ALLOWED` pins it: its file, the function or class it is
written in, the word and why. An entry that no longer matches anything fails too, so the
list only shrinks.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from fleetcheck.core import registry

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fleetcheck"


@dataclass(frozen=True)
class Allowed:
    path: str  # relative to the repository
    scope: str  # the qualified name of the function or class it is in ("" the module)
    word: str
    why: str


# why a word is something else where it is allowed
BROKER_TABLE = "the [broker] table of hosts.toml (the broker's address), not the check"
GROUPS_KEY = "the hosts' `groups` key and [groups.NAME] tables of hosts.toml, not the check"
INVENTORY = "an inventory's group names of a host, not the check"
DEMO_HOST = "the demo fleet's machine that runs the broker (a host's name), not the check"

ALLOWED: tuple[Allowed, ...] = (
    Allowed("fleetcheck/config/files.py", "check_files", "broker", BROKER_TABLE),
    Allowed("fleetcheck/config/files.py", "effective", "groups", GROUPS_KEY),
    Allowed("fleetcheck/config/loading.py", "", "broker", "TOP_LEVEL: " + BROKER_TABLE),
    Allowed("fleetcheck/config/loading.py", "", "groups", "TOP_LEVEL, NOT_SHARED: " + GROUPS_KEY),
    Allowed("fleetcheck/config/loading.py", "from_dict", "broker", BROKER_TABLE),
    Allowed("fleetcheck/config/loading.py", "_build_hosts", "groups", GROUPS_KEY),
    Allowed("fleetcheck/config/loading.py", "_build_host", "groups", GROUPS_KEY),
    Allowed("fleetcheck/config/inventory.py", "InventorySpec.__post_init__", "groups", INVENTORY),
    Allowed("fleetcheck/config/inventory.py", "Found.to_json", "groups", INVENTORY),
    Allowed("fleetcheck/config/inventory.py", "Found.from_json", "groups", INVENTORY),
    Allowed("fleetcheck/config/inventory.py", "var_keys", "groups", GROUPS_KEY),
    Allowed("fleetcheck/config/inventory.py", "merge", "groups", GROUPS_KEY),
    Allowed("fleetcheck/config/inventory_sources.py", "from_command_json", "groups", INVENTORY),
    Allowed("fleetcheck/config/inventory_sources.py", "_from_file_sd", "groups", INVENTORY),
    Allowed(
        "fleetcheck/rounds/notify_targets.py",
        "resolve",
        "groups",
        "a [[notify.rules]] rule's host groups",
    ),
    Allowed(
        "fleetcheck/core/check.py", "Scope", "broker", "Scope.BROKER's value, where checks do I/O"
    ),
    Allowed("fleetcheck/lab/demo.py", "_populate", "broker", DEMO_HOST),
    Allowed("fleetcheck/lab/demo.py", "DemoFleet.log_path", "broker", DEMO_HOST),
)

# Modules being rewritten elsewhere, skipped until they land; the stale test below fails once
# one names no check, until it is taken off this list
PENDING: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    scope: str
    word: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} ({self.scope or 'module'}): {self.what}"


def check_names() -> set[str]:
    names = set(registry.available())
    assert {"logs", "clients", "queue_depth"} <= names  # the registry is the one we mean
    return names


def modules() -> list[Path]:
    found = sorted(PACKAGE.rglob("*.py"))
    assert len(found) > 50
    return found


class Finder(ast.NodeVisitor):
    """Every place a module names one of `names`, with the function or class it is in."""

    def __init__(self, path: str, names: set[str]) -> None:
        self.path = path
        self.names = names
        self.scopes: list[str] = []
        self.hits: list[Hit] = []

    def hit(self, node: ast.AST, word: str, what: str) -> None:
        scope = ".".join(self.scopes)
        self.hits.append(Hit(self.path, getattr(node, "lineno", 0), scope, word, what))

    def scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scopes.append(node.name)
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = scoped  # noqa: N815 (the visitor's own naming)
    visit_AsyncFunctionDef = scoped  # noqa: N815
    visit_ClassDef = scoped  # noqa: N815

    def imported(self, node: ast.AST, module: str) -> None:
        parts = module.split(".")
        if parts[:2] == ["fleetcheck", "checks"] and len(parts) > 2 and parts[2] in self.names:
            self.hit(node, parts[2], f"imports {module}")

    def visit_Import(self, node: ast.Import) -> None:  # noqa: N802
        for alias in node.names:
            self.imported(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:  # noqa: N802
        module = node.module or ""
        self.imported(node, module)
        if module == "fleetcheck.checks":
            for alias in node.names:
                self.imported(node, f"{module}.{alias.name}")

    def visit_Constant(self, node: ast.Constant) -> None:  # noqa: N802
        if isinstance(node.value, str):
            if node.value in self.names:
                self.hit(node, node.value, f"the string {node.value!r} (a check's name)")
            self.imported(node, node.value)

    def visit_Attribute(self, node: ast.Attribute) -> None:  # noqa: N802
        # config.checks.logs: a check's settings looked up by its name
        base = node.value
        base_name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        if node.attr in self.names and base_name == "checks":
            self.hit(node, node.attr, f".checks.{node.attr} (a check's settings by name)")
        self.generic_visit(node)


def findings(names: set[str]) -> list[Hit]:
    out: list[Hit] = []
    for path in modules():
        rel = path.relative_to(ROOT).as_posix()
        finder = Finder(rel, names)
        finder.visit(ast.parse(path.read_text(), filename=rel))
        out += finder.hits
    return out


def allowed(hit: Hit) -> Allowed | None:
    if hit.path in PENDING:
        return Allowed(hit.path, "*", hit.word, "pending")
    for entry in ALLOWED:
        if (entry.path, entry.scope, entry.word) == (hit.path, hit.scope, hit.word):
            if hit.what.startswith("the string"):  # imports and lookups are never allowed
                return entry
    return None


def test_no_module_of_the_framework_names_a_check() -> None:
    hits = findings(check_names())
    named = [h for h in hits if allowed(h) is None]
    assert not named, "the framework names checks (declare it on the check instead):\n" + "\n".join(
        map(str, named)
    )


def test_every_allowed_word_is_still_there_and_says_why() -> None:
    """An allow-list entry that matches nothing is stale: it goes, so the list only shrinks."""
    hits = findings(check_names())
    for entry in ALLOWED:
        assert entry.why and entry.word in check_names(), entry
        assert any(allowed(h) == entry for h in hits), f"stale entry, remove it: {entry}"
    for path in PENDING:
        assert any(h.path == path for h in hits), f"{path} names no check now: unlist it"


def _found(source: str, names: set[str]) -> list[str]:
    finder = Finder("x.py", names)
    finder.visit(ast.parse(source))
    return [h.what for h in finder.hits]


def test_the_finder_sees_each_way_of_naming_a_check() -> None:
    """The finder itself, on snippets: a finder that sees nothing would pass any tree."""
    names = {"logs", "queue_depth"}
    cases: dict[str, str] = {
        "x = 'logs'": "the string 'logs' (a check's name)",
        "import fleetcheck.checks.logs": "imports fleetcheck.checks.logs",
        "from fleetcheck.checks.logs import CHECK": "imports fleetcheck.checks.logs",
        "from fleetcheck.checks import queue_depth": "imports fleetcheck.checks.queue_depth",
        "importlib.import_module('fleetcheck.checks.logs.check')": (
            "imports fleetcheck.checks.logs.check"
        ),
        "fleet.checks['queue_depth']": "the string 'queue_depth' (a check's name)",
        "config.get('logs')": "the string 'logs' (a check's name)",
        "fleet.checks.logs.max_age": ".checks.logs (a check's settings by name)",
    }
    for source, what in cases.items():
        assert what in _found(source, names), source
    for innocent in ("x = 'log'", "y = f'[checks.{name}]'", "import fleetcheck.checks"):
        assert _found(innocent, names) == [], innocent


def test_what_the_checks_declare_for_the_framework_is_well_formed() -> None:
    """What the framework reads instead of names: each declaration of every registered check
    is of its type, and the console's chart keys (its sections' ids) are unique."""
    from fleetcheck.core import declarations as d

    kinds = {
        "clues": d.Clue,
        "causes": d.Cause,
        "peer_metrics": d.PeerMetric,
        "correlations": d.HalfOpen,
        "charts": d.ChartSpec,
    }
    for attr, kind in kinds.items():
        for name, declared in registry.declared(attr):
            assert isinstance(declared, kind), f"{name}.{attr}: {declared!r} is not a {kind}"
    keys = [spec.key for _, spec in registry.declared("charts")]
    assert len(keys) == len(set(keys)), keys
    assert {"queue", "live", "connections", "logs"} <= set(keys)
