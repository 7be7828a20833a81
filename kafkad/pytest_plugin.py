"""pytest fixtures for a kafkad broker: installed with kafkad (entry point ``pytest11``:
``kafkad``), or named with ``pytest -p kafkad``.

    def test_roundtrip(kafkad_broker, kafkad_topic):
        p = confluent_kafka.Producer({"bootstrap.servers": kafkad_broker.bootstrap_servers})
        p.produce(kafkad_topic, b"hello")
        assert p.flush(10) == 0

Fixtures:

* ``kafkad_broker``: the :class:`kafkad.testing.Broker` for this test. Normally the session's
  broker, started when the first test asks for it (memory storage, a free loopback port,
  ``group.initial.rebalance.delay.ms=0``, then the ``kafkad_configs`` ini lines). A test marked
  ``@pytest.mark.kafkad(...)`` with configs that differ from the session's gets a broker of
  its own, started for it and stopped after it.
* ``kafkad_session_broker``: the session's broker itself (session scope), for fixtures of
  wider scope.
* ``kafkad_topic_factory``: ``create(partitions=1, configs=None, name=None) -> str`` makes a
  uniquely named topic (CreateTopics) on ``kafkad_broker``; each is deleted after the test.
* ``kafkad_topic``: one such topic with the defaults.

Configuration:

* ini option ``kafkad_configs``: lines ``name=value`` (Kafka's config names, including
  ``kafkad.fault.injection``) for the session's broker.
* marker ``@pytest.mark.kafkad({"num.partitions": 3}, "kafkad.fault.injection=...",
  log_retention_ms=1000)``: dicts, ``name=value`` strings and keywords, on top of the
  session's configs.

Under pytest-xdist each worker is its own session, so each worker starts its own broker. When a
test that used a broker fails, the broker's log lines written during the test are attached to
its report (section "kafkad broker log"). Nothing is started, and nothing changes, for a test
that asks for none of these fixtures: the plugin only adds an ini option and a marker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from kafkad.testing import DEFAULT_CONFIGS, Broker, normalize_configs

_BROKER_LOG = pytest.StashKey[tuple[Broker, int]]()
_STARTED = pytest.StashKey[list[str]]()  # bootstrap servers of the brokers started here

TopicFactory = Callable[..., str]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "kafkad_configs",
        type="linelist",
        default=[],
        help="kafkad: broker configs name=value (one a line) for the session's broker",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kafkad(*configs, **configs): broker configs (dicts, 'name=value' strings, keywords) "
        "for this test's kafkad_broker; configs that differ from the session's start a broker "
        "for the test alone",
    )


def _ini_configs(config: pytest.Config) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in config.getini("kafkad_configs"):
        name, sep, value = str(line).partition("=")
        if not sep or not name.strip():
            raise pytest.UsageError(f"kafkad_configs: expected name=value, got {line!r}")
        out[name.strip()] = value.strip()
    return normalize_configs(out)


def _marker_configs(item: pytest.Item) -> dict[str, str]:
    merged: dict[str, str] = {}
    for mark in reversed(list(item.iter_markers("kafkad"))):  # closest marker wins
        for arg in mark.args:
            if isinstance(arg, Mapping):
                merged.update(normalize_configs(arg))
            elif isinstance(arg, str) and "=" in arg:
                name, _, value = arg.partition("=")
                merged.update(normalize_configs({name.strip(): value.strip()}))
            else:
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.kafkad takes dicts, 'name=value' strings and "
                    f"keywords, not {arg!r}"
                )
        merged.update(normalize_configs(mark.kwargs))
    return merged


def _started(config: pytest.Config) -> list[str]:
    return config.stash.setdefault(_STARTED, [])


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """One line naming the brokers this process started (none: no line)."""
    started = config.stash.get(_STARTED, [])
    if started:
        terminalreporter.write_line(
            f"kafkad: started {len(started)} broker(s): {', '.join(started)}"
        )


@pytest.fixture(scope="session")
def kafkad_session_broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """The session's broker (one per xdist worker), started on first use."""
    with Broker(_ini_configs(request.config)) as b:
        _started(request.config).append(b.bootstrap_servers)
        yield b


@pytest.fixture
def kafkad_broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """The broker for this test: the session's, or its own if its marker asks for other
    configs."""
    session_configs = {**DEFAULT_CONFIGS, **_ini_configs(request.config)}
    wanted = {**session_configs, **_marker_configs(request.node)}
    if wanted == session_configs:
        b: Broker = request.getfixturevalue("kafkad_session_broker")
        if not b.alive():  # a crash= fault or a bug took it down in an earlier test
            pytest.fail(
                f"the session's kafkad broker ({b.bootstrap_servers}) has exited with status "
                f"{b.returncode}; its log ends:\n{b.log_text()[-4000:]}",
                pytrace=False,
            )
        request.node.stash[_BROKER_LOG] = (b, b.log_size())
        yield b
        return
    with Broker(wanted) as own:
        _started(request.config).append(own.bootstrap_servers)
        request.node.stash[_BROKER_LOG] = (own, 0)
        yield own


@pytest.fixture
def kafkad_topic_factory(
    kafkad_broker: Broker, request: pytest.FixtureRequest
) -> Iterator[TopicFactory]:
    """``create(partitions=1, configs=None, name=None)``: a new topic, deleted after the test."""
    made: list[str] = []

    def create(
        partitions: int = 1, configs: Mapping[str, Any] | None = None, name: str | None = None
    ) -> str:
        topic = kafkad_broker.create_topic(
            name or kafkad_broker.unique_topic_name(request.node.name),
            partitions=partitions,
            configs=configs,
        )
        made.append(topic)
        return topic

    yield create
    if made and kafkad_broker.alive():
        kafkad_broker.delete_topics(*made)


@pytest.fixture
def kafkad_topic(kafkad_topic_factory: TopicFactory) -> str:
    """A fresh one-partition topic on ``kafkad_broker``."""
    return kafkad_topic_factory()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    used = item.stash.get(_BROKER_LOG, None)
    if used is not None and report.failed:
        b, since = used
        text = b.log_text(since)
        header = f"kafkad broker log ({b.bootstrap_servers}, pid {b.pid}, {report.when})"
        report.sections.append((header, text or "(nothing logged during the test)"))
    return report
