"""The layering of docs/ARCHITECTURE.md, held by a test: which josefk package may import which.

Every import in josefk's source counts, at module level or inside a function, except those
under ``if TYPE_CHECKING:`` (annotations only, never executed). An arrow never points upward:
``records`` is the bottom; ``storage`` and ``protocol`` build on it; ``broker`` joins them;
``client`` speaks the protocol and never touches storage; ``cluster`` (the etcd metadata)
knows nothing of the broker that uses it. ``fileio`` (the atomic file write) sits below all
and any package may use it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "josefk"

ALLOWED: dict[str, set[str]] = {
    "fileio": set(),
    "records": set(),
    "protocol": {"records"},
    "config": set(),
    "metrics": set(),
    "cluster": set(),
    "storage": {"records", "config"},
    # broker -> client: the replica fetcher speaks to leaders with the clients' connection.
    "broker": {"records", "protocol", "storage", "config", "metrics", "cluster", "client"},
    "client": {"records", "protocol"},
    "spark": {"records", "protocol", "client"},
    "cli": {"records", "protocol", "storage", "config", "metrics", "cluster", "broker", "client"},
    # testing: brokers for applications' test suites; the same Broker josefk serve runs.
    "testing": {"broker", "config", "client"},
}
# storage's one way into config: the topic-level LogConfig it is configured with.
STORAGE_MAY_IMPORT_FROM_CONFIG = {"josefk.config.topic"}


def _imports(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, module) of every executed import of a josefk module."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield child.lineno, alias.name
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                yield child.lineno, child.module


def _violations() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if len(relative.parts) < 2:
            continue  # josefk/__init__.py, __main__.py: the entry points
        own = relative.parts[0]
        for line, module in _imports(ast.parse(path.read_text(), str(path))):
            parts = module.split(".")
            if parts[0] != "josefk" or len(parts) < 2 or parts[1] == own:
                continue
            target = parts[1]
            where = f"josefk/{relative}:{line} imports {module}"
            if target == "fileio":
                continue  # the one shared utility: below every layer
            if target not in ALLOWED.get(own, set()):
                found.append(f"{where} ({own} may not import {target})")
            elif (
                own == "storage"
                and target == "config"
                and module not in STORAGE_MAY_IMPORT_FROM_CONFIG
            ):
                found.append(f"{where} (storage takes only LogConfig from config)")
    return found


def test_every_package_is_in_the_table() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(ALLOWED)


def test_no_import_points_upward() -> None:
    assert _violations() == []


def test_type_checking_imports_do_not_count() -> None:
    tree = ast.parse("import josefk.broker\nif TYPE_CHECKING:\n    import josefk.cli\n")
    assert [m for _, m in _imports(tree)] == ["josefk.broker"]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _import_graph() -> dict[str, set[str]]:
    """module -> the josefk modules it imports (a package import counts as its __init__)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for _, module in _imports(ast.parse(path.read_text(), str(path))):
            # ``from josefk.x import y`` may name a module y or a name in josefk.x.
            while module and module not in modules:
                module = module.rpartition(".")[0]
            if module and module != name:
                edges.add(module)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_import_cycles() -> None:
    # Modules only: a package's __init__ re-exports its modules, and an import of the package
    # by one of them is no circle of code that runs.
    graph = _import_graph()
    packages = {n for n in graph if (PACKAGE.parent / n.replace(".", "/") / "__init__.py").exists()}
    modules_only = {
        n: {m for m in e if m not in packages} for n, e in graph.items() if n not in packages
    }
    assert _cycles(modules_only) == []
