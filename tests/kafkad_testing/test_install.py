"""Installed like a tool: ``kafkad serve`` and ``kafkad --help`` run on the runtime
dependencies alone, ``kafkad serve --help`` documents every option with examples, and the
Docker image gets every package the console script needs.

The dependency check runs the console script (as pyproject.toml declares it) in a subprocess
whose import system refuses every module of a test-only distribution (the test extra's
distributions that are not runtime dependencies, mapped to their top-level modules by
``importlib.metadata.packages_distributions``): a runtime import of one fails the run.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

from proxy.cli import build_parser
from proxy.healthcheck import check

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _dist_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _test_only_modules() -> set[str]:
    runtime = {_dist_name(r) for r in PROJECT["project"]["dependencies"]}
    test_only = {_dist_name(r) for r in PROJECT["project"]["optional-dependencies"]["test"]}
    test_only -= runtime
    modules = {
        module
        for module, dists in importlib.metadata.packages_distributions().items()
        if any(d.lower().replace("_", "-") in test_only for d in dists)
    }
    assert {"pytest", "hypothesis", "confluent_kafka", "xdist"} <= modules
    return modules


BLOCKING_DRIVER = textwrap.dedent(
    """
    import importlib, sys
    blocked = set(sys.argv[1].split(","))
    attempts = []

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in blocked:
                attempts.append(name)
                raise ModuleNotFoundError(f"test-only module {name} imported at runtime")
            return None

    sys.meta_path.insert(0, Refuse())
    module, _, func = sys.argv[2].partition(":")
    sys.argv = ["kafkad", *sys.argv[3:]]
    sys.modules["__main__"].__name__ = "kafkad_console_script"
    sys.exit(getattr(importlib.import_module(module), func)())
    """
)


def _console_script() -> str:
    return str(PROJECT["project"]["scripts"]["kafkad"])


def _blocked_run(*argv: str, **kw: object) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-c", BLOCKING_DRIVER, ",".join(sorted(_test_only_modules()))]
    return subprocess.Popen(
        [*cmd, _console_script(), *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,  # type: ignore[call-overload]
    )


def test_kafkad_help_needs_no_test_only_package() -> None:
    proc = _blocked_run("--help")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "serve" in out


def test_kafkad_serve_needs_no_test_only_package() -> None:
    proc = _blocked_run("serve", "--listen", "127.0.0.1:0", "--data-dir", "memory://")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.match(r"kafkad ready listen=127\.0\.0\.1:(\d+) ", line)
        assert match, line + proc.stderr.read() if proc.stderr else line
        deadline = time.monotonic() + 30
        while check("127.0.0.1", int(match.group(1)), 5.0) is not None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "test-only module" not in err, err
    assert "Traceback" not in err, err


def test_serve_help_documents_every_option_with_an_example() -> None:
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if a.dest == "command"]
    serve = subparsers.choices["serve"]  # type: ignore[attr-defined]
    for action in serve._actions:
        assert action.help and action.help.strip(), f"{action.option_strings} has no help"
    assert serve.epilog and "examples:" in serve.epilog
    # an example is a command line, then (after two spaces or more) what it does
    examples = [
        re.split(r"\s{2,}", line.strip())[0].split("kafkad serve", 1)[1]
        for line in serve.epilog.splitlines()
        if "kafkad serve" in line
    ]
    assert len(examples) >= 3
    options = {o for a in serve._actions for o in a.option_strings if o not in ("-h", "--help")}
    shown = {o for o in options if any(o in example for example in examples)}
    assert shown == options, f"options without an example: {sorted(options - shown)}"
    for example in examples:
        parser.parse_args(["serve", *shlex.split(example)])  # exits on a bad one


def test_the_image_copies_every_package_the_install_ships() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    include = PROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    for pattern in include:
        package = pattern.rstrip("*")
        assert f"COPY {package} ./{package}" in dockerfile, f"the image lacks {package}/"
    assert "pip install --no-cache-dir ." in dockerfile  # runtime deps only, no wheel cache
    dockerignore = (ROOT / ".dockerignore").read_text().split()
    assert "**/__pycache__" in dockerignore and "**/*.so" in dockerignore
