"""The layering of docs/ARCHITECTURE.md, held by a test: which josefk package may import which.

Every import in josefk's source counts, at module level or inside a function, except those
under ``if TYPE_CHECKING:`` (annotations only, never executed). An arrow never points upward:
``records`` is the bottom; ``storage`` and ``protocol`` build on it; ``broker`` joins them;
``client`` speaks the protocol and never touches storage; ``cluster`` (the etcd metadata)
knows nothing of the broker that uses it. ``fileio`` (the atomic file write) and ``util``
(clock and scheduler) sit below all and any package may use them.

Beyond packages: each third-party package with a concern of its own stays in the josefk
package that owns that concern (etcd's client in ``cluster``, pydantic in ``config`` ...);
inside ``broker``, handlers reach neither the network layer nor the dispatcher, and
``broker/errors.py`` (the error types and their codes) imports no other broker module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "josefk"

# Below every layer; any package may import them.
BOTTOM = {"fileio", "util"}

ALLOWED: dict[str, set[str]] = {
    "fileio": set(),
    "util": set(),
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
    # console: the web console, a client like any other.
    "console": {"records", "protocol", "client"},
    "cli": {
        "records",
        "protocol",
        "storage",
        "config",
        "metrics",
        "cluster",
        "broker",
        "client",
        "console",
    },
    # testing: brokers for applications' test suites; the same Broker josefk serve runs.
    "testing": {"broker", "config", "client"},
}
# storage's one way into config: the topic-level LogConfig it is configured with.
STORAGE_MAY_IMPORT_FROM_CONFIG = {"josefk.config.topic"}


@cache
def _parsed(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for all the tests here."""
    return ast.parse(path.read_text(), str(path))


def _imports(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, module) of every executed absolute import, josefk's or a third party's."""
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
        for line, module in _imports(_parsed(path)):
            parts = module.split(".")
            if parts[0] != "josefk" or len(parts) < 2 or parts[1] == own:
                continue
            target = parts[1]
            where = f"josefk/{relative}:{line} imports {module}"
            if target in BOTTOM:
                continue  # shared utilities: below every layer
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


def _import_graph(*, type_level: bool = False) -> dict[str, set[str]]:
    """module -> the josefk modules it imports (a package import counts as its __init__);
    with ``type_level`` also those under ``if TYPE_CHECKING:``."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        tree = _parsed(path)
        found = _every_import(tree) if type_level else _imports(tree)
        for _, module in found:
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


def _modules_only(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    # Modules only: a package's __init__ re-exports its modules, and an import of the package
    # by one of them is no circle of code that runs.
    packages = {n for n in graph if (PACKAGE.parent / n.replace(".", "/") / "__init__.py").exists()}
    return {n: {m for m in e if m not in packages} for n, e in graph.items() if n not in packages}


def _every_import(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """As ``_imports``, and those under ``if TYPE_CHECKING:`` too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def test_no_module_import_cycles() -> None:
    assert _cycles(_modules_only(_import_graph())) == []


def test_no_type_level_cycles() -> None:
    """Nor cycles that only annotations close (imports under TYPE_CHECKING): no code would
    run in a circle, but the modules could not be understood apart (the consumer and its
    group coordinator were the last pair; they now share a SubscriptionState)."""
    assert _cycles(_modules_only(_import_graph(type_level=True))) == []


# -- third-party packages stay in their layer -----------------------------------------------------

# Top-level import name -> the one josefk package that may import it.
THIRD_PARTY_HOME = {
    "aetcd": "cluster",
    "pydantic": "config",
    "pydantic_settings": "config",
    "prometheus_client": "metrics",
    "click": "cli",
    "rich": "cli",
    "aiohttp": "console",
}
# Parts of a package that another layer may also use: the console reads the brokers' metrics
# pages with prometheus-client's text parser (a reader; it creates no metric objects).
THIRD_PARTY_ALSO = {"prometheus_client.parser": "console"}


def _third_party_violations() -> set[str]:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        own = relative.parts[0] if len(relative.parts) > 1 else None
        for _, module in _imports(_parsed(path)):
            home = THIRD_PARTY_HOME.get(module.split(".")[0])
            if own is not None and THIRD_PARTY_ALSO.get(module) == own:
                continue
            if home is not None and own != home:
                found.add(f"josefk/{relative} imports {module}")
    return found


def test_third_party_packages_stay_in_their_layer() -> None:
    assert _third_party_violations() == set()


def test_the_single_node_path_never_loads_the_etcd_client() -> None:
    """The cluster's value types and errors are pure (josefk.cluster.values, errors): a
    single-node broker, its handlers and the command line import no etcd client; only a
    cluster broker does (the cluster node, imported when josefk.etcd.endpoints is set).
    tests/integration/test_single_node_without_etcd.py checks a running ``josefk serve``."""
    script = (
        "import sys\n"
        "import josefk.broker.server\n"
        "from josefk.broker.handlers import registered_handlers\n"
        "registered_handlers()\n"
        "from josefk.cli.main import _register\n"
        "_register()\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('aetcd', 'grpc'))\n"
        "print(loaded)\n"
        "import josefk.broker.cluster_node\n"
        "print('aetcd' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split("\n")
    assert out[0] == "[]"
    assert out[1] == "True"  # the check sees the client once a cluster module is imported


def test_the_third_party_rule_sees_imports() -> None:
    tree = ast.parse("import aetcd.exceptions\ndef f():\n    from rich.table import Table\n")
    assert [m for _, m in _imports(tree)] == ["aetcd.exceptions", "rich.table"]


# -- inside the broker ----------------------------------------------------------------------------

BROKER = PACKAGE / "broker"


def _josefk_imports(path: Path) -> set[str]:
    return {m for _, m in _imports(_parsed(path))}


def test_handlers_reach_neither_the_network_nor_the_dispatcher() -> None:
    forbidden = {"josefk.broker.network", "josefk.broker.dispatch", "josefk.broker.server"}
    found = []
    for path in sorted((BROKER / "handlers").rglob("*.py")):
        for module in _josefk_imports(path):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                found.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert found == []


def test_broker_errors_import_no_other_broker_module() -> None:
    for name in ("errors.py", "connection_errors.py"):
        imported = _josefk_imports(BROKER / name)
        assert {m for m in imported if m.startswith("josefk.broker")} == set(), name


def test_clock_and_scheduler_come_from_util() -> None:
    """josefk.storage.clock/scheduler are re-exports kept for branches written before the move;
    josefk's own modules import josefk.util."""
    moved = {"josefk.storage.clock", "josefk.storage.scheduler"}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "storage" and path.stem in ("clock", "scheduler"):
            continue
        for module in _josefk_imports(path) & moved:
            found.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert found == []
