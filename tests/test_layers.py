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
    ours = imported & set(OURS)
    assert ours <= ALLOWED[layer], f"{path} imports {sorted(ours - ALLOWED[layer])}"
    assert not imported & FORBIDDEN_THIRD_PARTY.get(layer, set())


def test_storage_is_reached_only_through_its_api() -> None:
    for layer in ("proxy", "coordinator"):
        for path in (ROOT / layer).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("storage."):
                    assert node.module in ALLOWED_STORAGE_MODULES, f"{path} imports {node.module}"


# The partition and topic layers sit on top of the log interface and are what handlers use.
ALLOWED_STORAGE_MODULES = {
    "storage.api",
    "storage.partition",
    "storage.topics",
    "storage.topic_config",
    "storage.cleaner.runner",  # the broker runs the log cleaner's loop
}
