"""No import cycles among fleetcheck's modules (fleetcheck/ and checks/, installed as
fleetcheck.checks). Read from the source with ast, nothing imported.

Every import that runs counts: module-level ones and those inside functions (a lazy import
still makes the two modules depend on each other; it only delays the failure): no cycle at
all. Imports under `if TYPE_CHECKING:` never run, but a cycle through one is still a layering
fault the type checker hides, so they count too.
`from a import b` counts as importing `a.b` when that is a module of ours, else `a`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def our_modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for path in sorted([*ROOT.glob("fleetcheck/**/*.py"), *ROOT.glob("checks/**/*.py")]):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[0] == "checks":
            parts.insert(0, "fleetcheck")
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """id() of every node under an `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                out.update(id(n) for n in ast.walk(stmt))
    return out


def imports_of(
    name: str, path: Path, mods: dict[str, Path], type_checking: bool = True
) -> set[str]:
    """The modules of ours that `name` imports anywhere in its source (without those under
    `if TYPE_CHECKING:` unless `type_checking`)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    skip = set() if type_checking else _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    ours = set()
    for target in found:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        if target and target != name:
            ours.add(target)
    return ours


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_cycles_finds_cycles(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected


def test_imports_of_reads_every_kind_of_import(tmp_path: Path) -> None:
    pkg = tmp_path / "fleetcheck"
    (pkg / "sub").mkdir(parents=True)
    source = (
        "from typing import TYPE_CHECKING\n"
        "import fleetcheck.a\n"
        "from fleetcheck import b\n"
        "from .sub import c\n"
        "if TYPE_CHECKING:\n    from fleetcheck.d import Thing\n"
        "def f():\n    from fleetcheck.e import g\n"
    )
    (pkg / "x.py").write_text(source)
    mods = {m: pkg / "x.py" for m in ["fleetcheck", "fleetcheck.x", "fleetcheck.sub"]}
    mods |= {f"fleetcheck.{m}": pkg / f"{m}.py" for m in "abde"} | {"fleetcheck.sub.c": pkg}
    assert imports_of("fleetcheck.x", pkg / "x.py", mods) == {
        "fleetcheck",
        "fleetcheck.a",
        "fleetcheck.b",
        "fleetcheck.sub",
        "fleetcheck.sub.c",
        "fleetcheck.d",
        "fleetcheck.e",
    }
    assert "fleetcheck.d" not in imports_of("fleetcheck.x", pkg / "x.py", mods, type_checking=False)


def test_no_import_cycles_among_the_imports_that_run() -> None:
    mods = our_modules()
    assert "fleetcheck.checks.live_hash" in mods and "fleetcheck.transport.ssh" in mods
    graph = {name: imports_of(name, path, mods, type_checking=False) for name, path in mods.items()}
    assert cycles(graph) == []


def test_no_import_cycles_with_type_checking_imports() -> None:
    mods = our_modules()
    graph = {name: imports_of(name, path, mods) for name, path in mods.items()}
    assert cycles(graph) == []
