"""The dependency direction of style.md, checked by walking every module's imports:
proxy -> coordinator -> storage -> wire; wire imports nothing of ours and never trio."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = ("wire", "proxy", "coordinator", "storage", "pipeline", "kafkad")
ALLOWED: dict[str, set[str]] = {
    "wire": {"wire"},
    "storage": {"storage", "wire"},
    "coordinator": {"coordinator", "storage", "wire"},
    "proxy": {"proxy", "coordinator", "storage", "wire"},
    "pipeline": {"pipeline", "wire"},
    "kafkad": {"kafkad", "proxy", "coordinator", "storage", "wire"},
}
FORBIDDEN_THIRD_PARTY = {"wire": {"trio", "socket", "asyncio"}}
# The `kafkad` console script (proxy/cli.py) hands client nouns to kafkad/cli: the one upward
# import, the entry point's dispatch (issue 19).
EXTRA: dict[str, set[str]] = {"proxy/cli.py": {"kafkad"}}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


MODULES = sorted(p for layer in OURS for p in (ROOT / layer).rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_layers(path: Path) -> None:
    layer = path.relative_to(ROOT).parts[0]
    imported = _imports(path)
    ours = imported & set(OURS) - EXTRA.get(path.relative_to(ROOT).as_posix(), set())
    assert ours <= ALLOWED[layer], f"{path} imports {sorted(ours - ALLOWED[layer])}"
    assert not imported & FORBIDDEN_THIRD_PARTY.get(layer, set())


def _storage_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("storage."):
            found.add(node.module or "")
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("storage."))
    return found


def test_storage_is_reached_only_through_its_api() -> None:
    for layer, allowed in (("proxy", ALLOWED_STORAGE_MODULES), ("coordinator", {"storage.api"})):
        for path in (ROOT / layer).rglob("*.py"):
            extra = _storage_modules(path) - allowed
            assert not extra, f"{path} imports {sorted(extra)}"


# The coordinators see storage only through storage.api (PartitionWriter, InternalTopics).
# The partition and topic layers sit on top of the log interface and are what handlers use.
ALLOWED_STORAGE_MODULES = {
    "storage.api",
    "storage.partition",
    "storage.topics",
    "storage.topic_config",
    "storage.log_validator",  # the produce path: Kafka's LogValidator rules before an append
    "storage.cleaner.runner",  # the broker runs the log cleaner's loop
    "storage.backends",  # the server opens the store its data dir names
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(path: Path, known: set[str]) -> set[str]:
    """Our modules this one imports when it runs: at module level or inside a function (a lazy
    import is still an edge), but not under ``if TYPE_CHECKING``. ``from pkg import sub`` is
    an edge to ``pkg.sub`` when that is a module."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{alias.name}" for alias in node.names} & known
            if subs:
                found.update(subs)
            elif node.module in known:
                found.add(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def test_no_import_cycles() -> None:
    """No module of ours reaches itself through imports, lazy ones included: a cycle hidden
    by an import inside a function is still a cycle (issue 13)."""
    paths = {_module_name(p): p for p in MODULES}
    graph = {name: _runtime_imports(p, set(paths)) - {name} for name, p in paths.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(name: str) -> None:
        state[name] = 1
        path.append(name)
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                walk(dep)
        path.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            walk(name)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)
