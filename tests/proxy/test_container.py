"""The container files, checked without a Docker engine (none runs here): the compose file
against the Compose Specification's JSON schema (check-jsonschema's vendored copy), the
Dockerfile and compose settings against what kafkad accepts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML

from proxy.cli import build_parser
from proxy.config import load_config

REPO = Path(__file__).resolve().parents[2]
SCHEMA = "vendor.compose-spec"  # check-jsonschema's copy of the Compose Specification schema
CHECK_COMPOSE = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", SCHEMA]


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def dockerfile_env() -> dict[str, str]:
    env = {}
    for word, rest in dockerfile_instructions():
        if word == "ENV":
            for item in rest.split():
                name, _, value = item.partition("=")
                env[name] = value
    return env


def test_the_compose_file_matches_the_compose_schema() -> None:
    result = subprocess.run(
        [*CHECK_COMPOSE, str(REPO / "docker-compose.yml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_runs_as_a_user_with_a_healthcheck_and_dev_defaults() -> None:
    instructions = dockerfile_instructions()
    users = [rest for word, rest in instructions if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    checks = [rest for word, rest in instructions if word == "HEALTHCHECK"]
    assert len(checks) == 1 and 'CMD ["kafkad", "healthcheck"]' in checks[0]
    assert build_parser().parse_args(["healthcheck"]).command == "healthcheck"
    env = dockerfile_env()
    assert env["KAFKAD_GROUP_INITIAL_REBALANCE_DELAY_MS"] == "0"
    # The image's settings are ones kafkad accepts (a wildcard listen needs an advertise).
    cfg = load_config(
        listen=env.get("KAFKAD_LISTEN"),
        advertise=env.get("KAFKAD_ADVERTISE"),
        data_dir=env["KAFKAD_DATA_DIR"],
        config_file=None,
        overrides={},
        environ=env,
    )
    assert cfg.get("group.initial.rebalance.delay.ms") == 0
    # Two listeners: other containers (kafkad:9092) and the Docker host (-p 9092:9093).
    assert [(x.name, x.port, x.advertised_host, x.advertised_port) for x in cfg.endpoints()] == [
        ("INTERNAL", 9092, "kafkad", 9092),
        ("HOST", 9093, "localhost", 9092),
    ]


def test_compose_services_have_healthchecks_and_kafka_two_listeners() -> None:
    compose = YAML(typ="safe").load((REPO / "docker-compose.yml").read_text())
    kafkad = compose["services"]["kafkad"]
    assert kafkad["healthcheck"]["test"] == ["CMD", "kafkad", "healthcheck"]
    assert kafkad["environment"]["KAFKAD_GROUP_INITIAL_REBALANCE_DELAY_MS"] == "0"
    # Two listeners, each advertising what its audience can reach: kafkad:9092 for services
    # in the compose project, the published host port for the host (and kafkad accepts them).
    env = {
        k: str(v).replace("${KAFKAD_HOST_PORT:-9092}", "9092")
        for k, v in kafkad["environment"].items()
    }
    assert kafkad["ports"] == ["${KAFKAD_HOST_PORT:-9092}:9093"]
    cfg = load_config(
        listen=None,
        advertise=None,
        data_dir="memory://",
        config_file=None,
        overrides={},
        environ=env,
    )
    assert [(x.name, x.port, x.advertised_host, x.advertised_port) for x in cfg.endpoints()] == [
        ("INTERNAL", 9092, "kafkad", 9092),
        ("HOST", 9093, "localhost", 9092),
    ]
    kafka = compose["services"]["kafka"]
    assert "kafka-broker-api-versions.sh" in " ".join(kafka["healthcheck"]["test"])
    advertised = kafka["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert "localhost:19092" in advertised and "kafka:29092" in advertised


def test_make_serve_installs_runtime_deps_only_and_skips_the_rebalance_delay() -> None:
    makefile = (REPO / "Makefile").read_text()
    serve = makefile.split("\nserve:", 1)[1].split("\n\n", 1)[0]
    assert "$(RUNTIME_STAMP)" in serve and "$(TEST_STAMP)" not in serve
    assert "group.initial.rebalance.delay.ms=0" in serve
    runtime = makefile.split("\n$(RUNTIME_STAMP):", 1)[1].split("\n\n", 1)[0]
    assert "install --quiet -e ." in runtime and "[test]" not in runtime
    test = makefile.split("\ntest:", 1)[1].split("\n", 1)[0]
    assert "$(TEST_STAMP)" in test


def _make_dry_run(workdir: Path, target: str) -> str:
    result = subprocess.run(
        ["make", "-n", "--no-print-directory", target],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_make_test_after_make_serve_installs_the_test_extras(tmp_path: Path) -> None:
    # A dry run (make -n) in a copy: the stamps decide what a fresh clone installs.
    for name in ("Makefile", "pyproject.toml", "setup.py", "wire/_record_kernel.c"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes((REPO / name).read_bytes())
    fresh_serve = _make_dry_run(tmp_path, "serve")
    assert "install --quiet -e .\n" in fresh_serve and "[test]" not in fresh_serve
    runtime_stamp = next(
        line.split()[-1] for line in fresh_serve.splitlines() if line.startswith("touch ")
    )
    (tmp_path / runtime_stamp).parent.mkdir(parents=True)
    (tmp_path / runtime_stamp).touch()  # as `make serve` leaves it
    after_serve = _make_dry_run(tmp_path, "test")
    assert "install --quiet -e '.[test]'" in after_serve
    assert "install --quiet -e .\n" not in after_serve  # the runtime install is not redone
    assert "install --quiet -e '.[test]'" not in _make_dry_run(tmp_path, "serve")
