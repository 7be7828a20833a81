"""The README claims only the clients the compat tests run (issue 21.7): each named client,
at the version pinned for the tests, has its compat test module, and no Java client is
claimed."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON_CLIENTS = {
    "confluent-kafka": "test_confluent_kafka.py",
    "kafka-python": "test_kafka_python.py",
    "aiokafka": "test_aiokafka.py",
}


def clients_paragraph() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("The clients tested against it")
    return " ".join(readme[start : readme.index("\n\n", start)].split())


def test_readme_names_each_tested_client_at_its_pinned_version() -> None:
    text = clients_paragraph()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = {}
    for deps in pyproject["project"]["optional-dependencies"].values():
        for dep in deps:
            if m := re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", dep):
                pins[m[1]] = m[2]
    for client, module in PYTHON_CLIENTS.items():
        assert f"{client} {pins[client]}" in text, client
        assert (ROOT / "compat_tests" / module).exists(), module
    kafkajs = json.loads((ROOT / "compat_tests/kafkajs/package.json").read_text())
    assert f"kafkajs {kafkajs['dependencies']['kafkajs']}" in text
    assert (ROOT / "compat_tests/test_kafkajs.py").exists()
    assert "kcat" in text and (ROOT / "compat_tests/test_kcat.py").exists()


def test_readme_claims_no_java_client() -> None:
    readme = (ROOT / "README.md").read_text()
    intro = readme[: readme.index("## ")]
    assert "the Java client" not in intro
    assert "No Java Kafka client is tested" in clients_paragraph()
