"""The layering of docs/ARCHITECTURE.md, held by a test: which josefk package may import which.

Every import in josefk's source counts, at module level or inside a function, except those
under ``if TYPE_CHECKING:`` (annotations only, never executed). An arrow never points upward:
``records`` is the bottom; ``storage`` and ``protocol`` build on it; ``broker`` joins them;
``client`` speaks the protocol and never touches storage; ``cluster`` (the etcd metadata)
knows nothing of the broker that uses it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "josefk"

ALLOWED: dict[str, set[str]] = {
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
