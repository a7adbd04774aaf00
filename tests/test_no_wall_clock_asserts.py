"""Issue 43, part 5: no test asserts a wall-clock time (a serve test failed at 1.06 s against
1.0 s on a loaded machine). Timings belong in bench/, as ratios measured in one run; a test
states an order, a count or a message that names the cause (the deadline's, the timeout's).

An `ast` scan of tests/*.py: an `assert` fails the scan when it compares a duration taken from
a clock (`time.monotonic`, `time.time`, `time.perf_counter`, `time.process_time`, their `_ns`
forms, `datetime.now`/`utcnow`) with anything that is not a clock reading, whether the clock is
read in the assert itself, in a local name assigned from it (at any remove: `start = ...;
took = ... - start`), or in what a helper of the same file returns (`report, took = fail(h)`).
A clock reading compared as an instant, untouched by arithmetic, is an order and passes
(`before <= stamp <= after`). Durations a program reports (`duration_s` in its JSON) are out
of the scan's sight: review them.

An upper bound is allowed only as a hang guard (10x or more what the work needs, its message
says "hung"), pinned below to its file and function with the reason. `tests/hang.py` guards
without an assert, so most hang guards need no entry at all."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent

CLOCKS = {
    "time": {"monotonic", "time", "perf_counter", "process_time", "monotonic_ns", "time_ns",
             "perf_counter_ns", "process_time_ns"},
    "datetime": {"now", "utcnow"},
}  # fmt: skip

# (file, function) -> why its bound on a duration is a hang guard and not a timing
HANG_GUARDS: dict[tuple[str, str], str] = {
    ("test_framing.py", "test_hostile_output_is_framed_in_linear_time"): (
        "a complexity guard in CPU time: the quadratic framing took hours for 8 MiB, one pass "
        "takes a fraction of a second; the bound (10 s) is 30x that and its message says hung"
    ),
}

# (file, function) -> why it is not fixed here. Not an allowance: each entry must still be
# found (then it fails as stale: remove it), and the list only shrinks.
ELSEWHERE: dict[tuple[str, str], str] = {
    (
        "test_serve_hostile.py",
        "test_item3_out_of_file_descriptors_neither_spins_nor_prints_tracebacks",
    ): (
        "CPU seconds over a 2 s wall-clock window (< 15% of a core): the console server's "
        "tests are its owner's to re-express (a count of wake-ups, or bench/)"
    ),
}


@dataclass(frozen=True)
class Finding:
    file: str
    function: str
    line: int
    source: str

    def __str__(self) -> str:
        return f"tests/{self.file}:{self.line} in {self.function}: {self.source}"


class _Clocks:
    """Which names of a module are clocks: `time.monotonic` through `import time` (or an alias)
    and `from time import monotonic`, `datetime.now` through `from datetime import datetime`
    or `import datetime`."""

    def __init__(self, tree: ast.Module) -> None:
        self.modules: dict[str, str] = {}  # local name -> "time" / "datetime" (a module)
        self.classes: set[str] = set()  # local names of datetime.datetime
        self.functions: set[str] = set()  # local names of time.monotonic & co
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in CLOCKS:
                        self.modules[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom) and node.module in CLOCKS:
                for a in node.names:
                    if node.module == "time" and a.name in CLOCKS["time"]:
                        self.functions.add(a.asname or a.name)
                    elif node.module == "datetime" and a.name == "datetime":
                        self.classes.add(a.asname or a.name)

    def is_reading(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        f = node.func
        if isinstance(f, ast.Name):
            return f.id in self.functions
        if not isinstance(f, ast.Attribute):
            return False
        owner = f.value
        if isinstance(owner, ast.Name):
            if self.modules.get(owner.id) == "time":
                return f.attr in CLOCKS["time"]
            if owner.id in self.classes:
                return f.attr in CLOCKS["datetime"]
        # datetime.datetime.now() through `import datetime`
        return (
            isinstance(owner, ast.Attribute)
            and owner.attr == "datetime"
            and isinstance(owner.value, ast.Name)
            and self.modules.get(owner.value.id) == "datetime"
            and f.attr in CLOCKS["datetime"]
        )


READING, DURATION = "reading", "duration"
ARITHMETIC = {"round", "float", "int", "min", "max", "sum"}


def _widest(kinds: Iterable[str | None]) -> str | None:
    found = set(kinds)
    return DURATION if DURATION in found else READING if READING in found else None


class _Scope:
    """The clock-derived names of one top-level function (its nested functions included)."""

    def __init__(self, clocks: _Clocks, helpers: dict[str, list[str | None]]) -> None:
        self.clocks = clocks
        self.helpers = helpers  # module function -> per returned position: READING/DURATION
        self.names: dict[str, str] = {}

    def kind(self, node: ast.AST | None) -> str | None:
        """READING for an instant (a clock reading, a name holding one, one moved by a
        non-clock amount: `now - 30`), DURATION for a span (the difference of two clock
        values, anything subtracted from a reading, `abs`, `.total_seconds()`, what a helper
        returns from one), None for a value no clock went into."""
        if node is None or isinstance(node, ast.Lambda):
            return None
        if self.clocks.is_reading(node):
            return READING
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Call):
            # a clock goes through a method of its value, through arithmetic builtins and
            # through a helper of the file; any other call given a clock reading makes data
            f = node.func
            if isinstance(f, ast.Attribute):
                k = self.kind(f.value)
                return DURATION if k and f.attr == "total_seconds" else k
            if isinstance(f, ast.Name) and f.id == "abs":
                return DURATION if any(self.kind(a) for a in node.args) else None
            if isinstance(f, ast.Name) and f.id in ARITHMETIC:
                return _widest(self.kind(a) for a in node.args)
            kinds = self.helpers.get(f.id) if isinstance(f, ast.Name) else None
            return DURATION if kinds and len(kinds) == 1 and kinds[0] else None
        if isinstance(node, ast.BinOp):
            left, right = self.kind(node.left), self.kind(node.right)
            if left and right:
                return DURATION  # `time.monotonic() - start`
            if right:
                return right if isinstance(node.op, ast.Add) else DURATION  # `e - time.time()`
            if left:
                return left if isinstance(node.op, ast.Add | ast.Sub) else DURATION
            return None
        return _widest(self.kind(c) for c in ast.iter_child_nodes(node))

    def assign(self, target: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Name):
            k = self.kind(value)
            if k:
                self.names[target.id] = k
            return
        if isinstance(target, ast.Tuple | ast.List):
            if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts, strict=True):
                    self.assign(t, v)
                return
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                kinds = self.helpers.get(value.func.id) or []
                if len(kinds) == len(target.elts):
                    for t, k in zip(target.elts, kinds, strict=True):
                        if isinstance(t, ast.Name) and k:
                            self.names[t.id] = k
                return
            if self.kind(value):
                for t in target.elts:
                    if isinstance(t, ast.Name):
                        self.names[t.id] = DURATION

    def learn(self, fn: ast.AST) -> None:
        """Names assigned from clocks, to a fixed point (an assignment may come before the
        one it depends on in the walk's order)."""
        while True:
            before = dict(self.names)
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        self.assign(t, node.value)
                elif isinstance(node, ast.AnnAssign | ast.NamedExpr):
                    self.assign(node.target, node.value)
                elif isinstance(node, ast.AugAssign) and self.kind(node.value):
                    self.assign(node.target, node.value)
            if self.names == before:
                return


def _returns(fn: ast.FunctionDef | ast.AsyncFunctionDef, scope: _Scope) -> list[str | None]:
    """Per returned position, whether a clock went into it (one position for a non-tuple)."""
    kinds: list[str | None] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and node.value is not None:
            elts = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            found = [scope.kind(e) for e in elts]
            if not kinds:
                kinds = found
            elif len(kinds) == len(found):
                kinds = [a or b for a, b in zip(kinds, found, strict=True)]
    return kinds


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                    out.append((f"{node.name}.{sub.name}", sub))
    return out


def scan(source: str, file: str) -> list[Finding]:
    """Every assert of `source` that compares a clock-derived duration with a non-clock value."""
    tree = ast.parse(source)
    clocks = _Clocks(tree)
    functions = _functions(tree)
    helpers: dict[str, list[str | None]] = {}
    while True:  # helpers that return durations, also through other helpers
        before = dict(helpers)
        for name, fn in functions:
            scope = _Scope(clocks, helpers)
            scope.learn(fn)
            kinds = _returns(fn, scope)
            if any(kinds):
                helpers[name] = kinds
        if helpers == before:
            break
    lines = source.splitlines()
    findings = []
    for name, fn in functions:
        scope = _Scope(clocks, helpers)
        scope.learn(fn)
        for node in ast.walk(fn):
            if not isinstance(node, ast.Assert):
                continue
            for cmp in ast.walk(node.test):
                if isinstance(cmp, ast.Compare) and _compares_a_duration(cmp, scope):
                    text = lines[node.lineno - 1].strip()
                    findings.append(Finding(file, name, node.lineno, text))
                    break
    return findings


def _compares_a_duration(cmp: ast.Compare, scope: _Scope) -> bool:
    operands = (cmp.left, *cmp.comparators)
    kinds = [scope.kind(x) for x in operands]
    if any(isinstance(op, ast.Is | ast.IsNot | ast.In | ast.NotIn) for op in cmp.ops):
        return False
    if all(isinstance(op, ast.Eq | ast.NotEq) for op in cmp.ops) and not any(
        _is_approx(x) for x in operands
    ):
        return False  # a stamp planted and read back is a value; `== approx(...)` a timing
    # a duration against a number; a bare reading against a constant (no order between
    # instants: `before <= stamp` is an order, `time.time() < 1e9` a wall-clock value)
    if DURATION in kinds and None in kinds:
        return True
    return READING in kinds and any(
        k is None and isinstance(x, ast.Constant) for k, x in zip(kinds, operands, strict=True)
    )


def _is_approx(node: ast.AST) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name == "approx"


@functools.cache
def scan_tests() -> tuple[Finding, ...]:
    found: list[Finding] = []
    for path in sorted(TESTS.glob("*.py")):
        found += scan(path.read_text(), path.name)
    return tuple(found)


def test_no_test_asserts_a_wall_clock_time() -> None:
    found = [f for f in scan_tests() if (f.file, f.function) not in HANG_GUARDS | ELSEWHERE]
    assert not found, (
        "asserts on a wall-clock duration (timings go to bench/; a test states an order, a "
        "count or the cause; a hang guard uses tests/hang.py or is pinned in HANG_GUARDS):\n"
        + "\n".join(map(str, found))
    )


def test_every_pinned_hang_guard_is_still_there_and_says_hung() -> None:
    found = {(f.file, f.function): f for f in scan_tests()}
    for (file, function), why in HANG_GUARDS.items():
        assert why, (file, function)
        assert (file, function) in found, f"stale hang-guard entry: {file} {function}"
        tree = ast.parse((TESTS / file).read_text())
        fn = dict(_functions(tree))[function]
        said = [n.msg for n in ast.walk(fn) if isinstance(n, ast.Assert) and n.msg is not None]
        assert any("hung" in ast.unparse(m) for m in said), f"{file} {function}: say hung"


def test_every_entry_left_for_elsewhere_is_still_there() -> None:
    found = {(f.file, f.function) for f in scan_tests()}
    stale = [key for key in ELSEWHERE if key not in found]
    assert not stale, f"no longer asserts a wall-clock time: remove from ELSEWHERE: {stale}"


def flagged(body: str) -> list[int]:
    source = "import time\nfrom datetime import datetime\n" + body
    return [f.line - 2 for f in scan(source, "x.py")]


def test_the_scan_finds_each_shape_of_a_timing() -> None:
    cases = {
        "def t():\n    s = time.monotonic()\n    x = time.monotonic() - s\n    assert x < 1\n": 4,
        "def t():\n    s = time.monotonic()\n    assert time.monotonic() - s < 1.5 + 1\n": 3,
        "def t():\n    s = time.perf_counter()\n    e = time.perf_counter()\n    d = e - s\n"
        "    assert ok and 0.5 < d\n": 5,
        "def t(l):\n    s = datetime.now()\n    took = (datetime.now() - s).total_seconds()\n"
        "    assert took < l\n": 4,
        "def t(e):\n    assert abs(e - time.time()) < 60\n": 2,
        "def t(stamp):\n    made = datetime.now()\n"
        "    assert (stamp - made).total_seconds() < 3\n": 3,
        "def t():\n    d = time.monotonic() + 5\n    left = d - time.monotonic()\n"
        "    assert left > 0\n": 4,
        "def f(h):\n    s = time.monotonic()\n    return h, time.monotonic() - s\n"
        "def t():\n    e, took = f(1)\n    assert e and took < 3\n": 6,
        "def f():\n    s = time.monotonic()\n    return time.monotonic() - s\n"
        "def t():\n    assert f() <= 2\n": 5,
        "def t():\n    assert time.time() > 1e9\n": 2,
        "def t():\n    s = time.monotonic()\n    took = time.monotonic() - s\n"
        "    assert took == pytest.approx(1.0, abs=0.5)\n": 4,
    }
    for body, line in cases.items():
        assert flagged(body) == [line], body


def test_the_scan_lets_orders_counts_and_values_pass() -> None:
    cases = [
        "def t(stamp):\n    before = time.time()\n    after = time.time()\n"
        "    assert before <= stamp <= after\n",
        "def t():\n    d = time.monotonic() + 5\n    assert time.monotonic() < d\n",
        "def f():\n    return time.monotonic()\n"
        "def t(x):\n    e, n = g(1)\n    assert n == 2 and x < 3\n",
        "def t(r):\n    now = time.time()\n    r.set(now)\n    assert r.count == 1\n",
        "def t(x):\n    s = time.monotonic()\n    assert x is not None\n",
        "def t(stamp):\n    made = datetime.now().replace(microsecond=0)\n"
        "    assert made - timedelta(seconds=1) <= stamp <= made + timedelta(seconds=1)\n",
        "def t(r):\n    now = time.time()\n    r.hset('k', now - 30)\n"
        "    assert r.hget('k') == now - 30 and r.age(now + 5) < 60\n",
    ]
    for body in cases:
        assert flagged(body) == [], body
