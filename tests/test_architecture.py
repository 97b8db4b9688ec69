"""The shape of the code, checked (issues 19 and 39, docs/architecture.md): the layers import only downwards
(a layer map that places every package), no module is several modules joined, every package says what it
owns, the commands send no SQL of their own, bench/ does not lean on tests/ and no benchmark on another.

Imports are read from the source (ast), module-level only: an import inside a function or under
`if TYPE_CHECKING:` runs later or never, and is how a module names a type of a layer above it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "worker"
MAX_LINES = 400  # outside worker/ratings/, whose modules follow their rulebooks


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    return {module_name(p): p for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def top_level_imports(path: Path, name: str) -> set[str]:
    """The modules `name` imports when it is imported (resolved to module names, not attributes)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(body) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                found.add(mod)
                found.update(f"{mod}.{a.name}" for a in node.names)  # `from pkg import module`
            elif isinstance(node, ast.If) and not _type_checking(node):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)

    visit(tree.body)
    return found


WORKER_MODULES = modules(WORKER)


def graph() -> dict[str, set[str]]:
    """worker module -> the worker modules it imports at import time."""
    edges: dict[str, set[str]] = {}
    for name, path in WORKER_MODULES.items():
        edges[name] = {m for m in top_level_imports(path, name) if m in WORKER_MODULES and m != name}
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if state.get(nxt) is None and (cycle := dfs(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if state.get(node) is None and (cycle := dfs(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_worker():
    cycle = find_cycle(graph())
    assert cycle is None, " -> ".join(cycle)


def test_ratings_import_nothing_outside_ratings_but_the_standard_library():
    problems = []
    for name, path in WORKER_MODULES.items():
        if not name.startswith("worker.ratings"):
            continue
        for imported in top_level_imports(path, name):
            top = imported.split(".")[0]
            if top == "worker" and not imported.startswith("worker.ratings"):
                problems.append(f"{name} imports {imported}")
            elif top not in ("worker", "__future__") and top not in sys.stdlib_module_names:
                problems.append(f"{name} imports {imported} (not the standard library)")
    assert problems == []


#: The packages of worker/ by layer, lowest first (docs/architecture.md): a package imports only from the layers
#: below its own, never from one above nor from another package of its layer. worker.ratings imports nothing of
#: the worker's (the test above); the modules at the top of worker/ (config, observability, ...) are not layers.
LAYERS = [
    ("worker.ratings",),
    ("worker.contract",),
    ("worker.store",),
    ("worker.engine",),
    ("worker.pipeline", "worker.offline", "worker.dev", "worker.terminal", "worker.api"),
    ("worker.commands",),
]
#: what a layer must not import beside: the library of a layer it does not talk to
NOT_IMPORTED = {"worker.engine": ("aiokafka",), "worker.store": ("aiokafka",)}


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_the_layer_map_places_every_package_of_worker():
    packages = {_package(name) for name, path in WORKER_MODULES.items() if path.name == "__init__.py" and "." in name}
    placed = {package for layer in LAYERS for package in layer}
    assert packages - placed == set(), "a new package: place it in LAYERS (and docs/architecture.md)"


def upward_imports(imports: dict[str, set[str]]) -> list[str]:
    """What breaks the layer map in `imports` (module -> the modules it imports)."""
    level = {package: i for i, layer in enumerate(LAYERS) for package in layer}
    problems = []
    for name, imported in sorted(imports.items()):
        if (mine := level.get(_package(name))) is None:
            continue
        banned = NOT_IMPORTED.get(_package(name), ())
        for other in sorted(imported):
            theirs = level.get(_package(other))
            if (_package(other) != _package(name) and theirs is not None and theirs >= mine) or any(
                    other == b or other.startswith(b + ".") for b in banned):
                problems.append(f"{name} imports {other}")
    return problems


def test_the_layer_rule_catches_an_upward_import():
    """worker.dev.streams once imported worker.commands.importer (issue 39); a sibling and a banned library too."""
    assert upward_imports({"worker.dev.streams": {"worker.commands.importer", "worker.contract.schemas"},
                           "worker.pipeline.loop": {"worker.dev.proxy", "worker.engine"},
                           "worker.store.postgres": {"aiokafka", "worker.store.queries"}}) == [
        "worker.dev.streams imports worker.commands.importer", "worker.pipeline.loop imports worker.dev.proxy",
        "worker.store.postgres imports aiokafka"]


def test_a_layer_imports_no_layer_above_it():
    assert upward_imports({name: top_level_imports(path, name) for name, path in WORKER_MODULES.items()}) == []


def test_no_module_outside_ratings_is_over_the_size_limit():
    big = {name: n for name, path in WORKER_MODULES.items()
           if not name.startswith("worker.ratings") and (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert big == {}, f"over {MAX_LINES} lines: split by what they hold"


def test_the_commands_send_no_sql_of_their_own():
    """The operator's reads are the store's (worker.store.reads), where the read API finds them too."""
    problems = [f"{name} imports {imported}"
                for name, path in WORKER_MODULES.items() if name.startswith("worker.commands")
                for imported in _all_imports(path) if imported.startswith("worker.store.queries")]
    assert problems == []


def test_every_package_says_what_it_owns():
    silent = [name for name, path in WORKER_MODULES.items()
              if path.name == "__init__.py" and name != "worker" and not ast.get_docstring(ast.parse(path.read_text()))]
    assert silent == []


def test_bench_imports_nothing_from_tests():
    problems = [f"{name} imports {imported}"
                for name, path in modules(ROOT / "bench").items()
                for imported in _all_imports(path)
                if imported == "tests" or imported.startswith("tests.")]
    assert problems == []


def benchmarks() -> set[str]:
    """The modules bench/__main__.py runs as benchmarks: `_run("name", ...)` and `import_module("bench.name")`."""
    found = set()
    for node in ast.walk(ast.parse((ROOT / "bench" / "__main__.py").read_text())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            value = node.args[0].value
            if name == "_run":
                found.add(f"bench.{value}")
            elif name == "import_module" and str(value).startswith("bench."):
                found.add(value)
    return found


def test_no_benchmark_imports_another():
    """What benchmarks share is in modules that are not benchmarks (common.py, runs.py, against_limit.py, ...)."""
    bench = modules(ROOT / "bench")
    runs = benchmarks()
    assert {"bench.pipeline", "bench.suite", "bench.limit", "bench.engine"} <= runs <= set(bench)
    problems = [f"{name} imports {imported}" for name in sorted(runs)
                for imported in sorted(_all_imports(bench[name], names=True)) if imported in runs - {name}]
    assert problems == []


def _all_imports(path: Path, names: bool = False) -> set[str]:
    """Every import of a file, wherever it stands (bench may import inside functions); with `names`, also
    what `from package import name` names (a module, perhaps)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            if names:
                found.update(f"{node.module}.{a.name}" for a in node.names)
    return found
