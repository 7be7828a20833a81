"""``pip install kafkad[spark]`` installs every third-party module the Spark connector
(``pipeline/``) imports: each import resolves to a distribution named in the ``spark`` extra or
in the base dependencies of pyproject.toml."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OURS = {"wire", "proxy", "coordinator", "storage", "pipeline", "kafkad"}


def _requirement_names(specs: list[str]) -> set[str]:
    return {
        re.split(r"[=<>!~\[; ]", spec, maxsplit=1)[0].lower().replace("_", "-") for spec in specs
    }


def _imported_top_levels() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "pipeline").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names - OURS - set(sys.stdlib_module_names)


def test_the_spark_extra_covers_every_import_of_the_connector() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    provided = _requirement_names(project["dependencies"]) | _requirement_names(
        project["optional-dependencies"]["spark"]
    )
    distributions = importlib.metadata.packages_distributions()
    imported = _imported_top_levels()
    assert "pyspark" in imported and "confluent_kafka" in imported  # the check sees real imports
    missing = {
        module: distributions.get(module, [module])
        for module in imported
        if not {d.lower().replace("_", "-") for d in distributions.get(module, [module])} & provided
    }
    assert not missing, f"pipeline/ imports modules no [spark] requirement provides: {missing}"
