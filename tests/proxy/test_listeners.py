"""Several named PLAINTEXT listeners (issue 25 point 7): the config rules, and a real broker
whose answers advertise the address of the listener each request came in on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from kio.schema.describe_cluster.v1 import request as dcl
from kio.schema.find_coordinator.v4 import request as fc
from kio.schema.metadata.v12 import request as md

from proxy.cli import startup_failure
from proxy.config import BrokerConfig, load_config
from proxy.listeners import Listener
from proxy.properties_file import ConfigError
from proxy.server import Server
from tests.proxy.harness import connect

REPO = Path(__file__).resolve().parents[2]


def _load(
    *,
    listen: str | None = None,
    advertise: str | None = None,
    environ: dict[str, str] | None = None,
    config_file: str | None = None,
    **overrides: str,
) -> BrokerConfig:
    return load_config(
        listen=listen,
        advertise=advertise,
        data_dir="memory://",
        config_file=config_file,
        overrides={k.replace("_", "."): v for k, v in overrides.items()},
        environ=environ or {},
    )


def _addresses(cfg: BrokerConfig) -> list[tuple[str, str, int, str, int | None]]:
    return [(x.name, x.host, x.port, x.advertised_host, x.advertised_port) for x in cfg.endpoints()]


TWO = "INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092"
TWO_ADVERTISED = "INTERNAL://kafkad:9092,EXTERNAL://localhost:19092"
TWO_MAP = "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"


def test_two_named_listeners_from_set() -> None:
    cfg = _load(
        listeners=TWO,
        advertised_listeners=TWO_ADVERTISED,
        listener_security_protocol_map=TWO_MAP,
    )
    assert _addresses(cfg) == [
        ("INTERNAL", "0.0.0.0", 9092, "kafkad", 9092),
        ("EXTERNAL", "0.0.0.0", 19092, "localhost", 19092),
    ]
    assert {x.protocol for x in cfg.endpoints()} == {"PLAINTEXT"}
    assert cfg.get("listeners") == TWO  # a broker config too (DescribeConfigs shows it)


def test_two_named_listeners_from_the_environment() -> None:
    env = {
        "KAFKAD_LISTENERS": TWO,
        "KAFKAD_ADVERTISED_LISTENERS": TWO_ADVERTISED,
        "KAFKAD_LISTENER_SECURITY_PROTOCOL_MAP": TWO_MAP,
    }
    assert [x[3] for x in _addresses(_load(environ=env))] == ["kafkad", "localhost"]


def test_a_listener_without_an_advertised_entry_advertises_its_bind_address() -> None:
    cfg = _load(
        listeners="PLAINTEXT://127.0.0.1:9092,OTHER://127.0.0.2:0",
        advertised_listeners="PLAINTEXT://public:9092",
        listener_security_protocol_map="PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
    )
    # Port 0: the bound port is advertised once known (None until the server binds).
    assert _addresses(cfg) == [
        ("PLAINTEXT", "127.0.0.1", 9092, "public", 9092),
        ("OTHER", "127.0.0.2", 0, "127.0.0.2", None),
    ]


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "needs an advertised.listeners entry"),
        (
            {"listeners": "PLAINTEXT://a:9092,PLAINTEXT://b:9093"},
            "listener name PLAINTEXT appears twice",
        ),
        (
            {
                "listeners": "A://a:9092,B://b:9092",
                "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
            },
            "A and B all bind port 9092",
        ),
        (
            {
                "listeners": "PLAINTEXT://a:9092",
                "advertised.listeners": "PLAINTEXT://a:9092,OTHER://b:9093",
            },
            "OTHER not in listeners",
        ),
        ({"listeners": "INTERNAL://a:9092"}, "no security protocol for listener INTERNAL"),
        ({"listeners": "SASL_SSL://a:9093"}, "listener SASL_SSL is TLS but has no keystore"),
        (
            {"listeners": "SASL_PLAINTEXT://a:9093"},
            "sasl.enabled.mechanisms names GSSAPI, which kafkad does not serve",
        ),
        (
            {"listeners": "SASL_PLAINTEXT://a:9093", "sasl.enabled.mechanisms": "PLAIN"},
            "PLAIN needs its users: set listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
        ({"listeners": "SSL://a:9093"}, "listener SSL is TLS but has no keystore"),
        (
            {
                "listeners": "PLAINTEXT://0.0.0.0:9092",
                "advertised.listeners": "PLAINTEXT://0.0.0.0:9092",
            },
            "cannot connect to a wildcard address",
        ),
        ({"listeners": "PLAINTEXT://a:99999"}, "between 0 and 65535"),
        ({"listeners": "a:9092"}, "is not NAME://HOST:PORT"),
        ({"advertised.listeners": "OTHER://a:9092"}, "OTHER not in listeners"),
    ],
)
def test_listener_rules(settings: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load_config(
            listen=None,
            advertise=None,
            data_dir="memory://",
            config_file=None,
            overrides=settings,
            environ={},
        )


def test_port_zero_may_repeat_and_ipv4_and_ipv6_may_share_a_port() -> None:
    cfg = _load(
        listeners="A://127.0.0.1:0,B://127.0.0.1:0",
        listener_security_protocol_map="A:PLAINTEXT,B:PLAINTEXT",
    )
    assert [x.port for x in cfg.endpoints()] == [0, 0]
    cfg = _load(
        listeners="A://127.0.0.1:9092,B://[::1]:9092",
        listener_security_protocol_map="A:PLAINTEXT,B:PLAINTEXT",
    )
    assert [(x.host, x.port) for x in cfg.endpoints()] == [("127.0.0.1", 9092), ("::1", 9092)]
    with pytest.raises(ConfigError, match="A and B and C all bind port 9092"):
        _load(
            listeners="A://127.0.0.1:9092,B://[::1]:9092,C://host:9092",
            listener_security_protocol_map="A:PLAINTEXT,B:PLAINTEXT,C:PLAINTEXT",
        )


def test_listen_and_listeners_are_not_combined() -> None:
    with pytest.raises(ConfigError, match="--listen and listeners are both given"):
        _load(listen="127.0.0.1:9092", listeners="PLAINTEXT://127.0.0.1:9093")
    with pytest.raises(
        ConfigError, match=r"--advertise and listeners and advertised\.listeners are both given"
    ):
        _load(
            advertise="h:1",
            environ={"KAFKAD_ADVERTISED_LISTENERS": "PLAINTEXT://h:2"},
            listeners="PLAINTEXT://127.0.0.1:9093",
        )


KRAFT_TWO = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=HOST://:19092,INTERNAL://:29092,CONTROLLER://:9093
advertised.listeners=HOST://localhost:19092,INTERNAL://kafka:29092
inter.broker.listener.name=INTERNAL
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,HOST:PLAINTEXT,INTERNAL:PLAINTEXT
"""


def test_a_server_properties_with_two_client_listeners(tmp_path: Path) -> None:
    # The optional Kafka service's layout in docker-compose.yml, as a server.properties file.
    path = tmp_path / "server.properties"
    path.write_text(KRAFT_TWO)
    cfg = _load(config_file=str(path))
    assert _addresses(cfg) == [
        ("HOST", "0.0.0.0", 19092, "localhost", 19092),
        ("INTERNAL", "0.0.0.0", 29092, "kafka", 29092),
    ]  # the controller listener is not bound
    assert cfg.inter_broker_listener == "INTERNAL"  # its connection quotas differ
    assert _load(listen="127.0.0.1:0").inter_broker_listener == "PLAINTEXT"  # Kafka's default
    # --listen is the one-listener form and replaces the file's listeners (one clear rule) ...
    assert _addresses(_load(config_file=str(path), listen="127.0.0.1:0")) == [
        ("PLAINTEXT", "127.0.0.1", 0, "127.0.0.1", None)
    ]
    # ... and --advertise alone cannot say which of two listeners it means.
    with pytest.raises(ConfigError, match="--advertise is for one listener"):
        _load(config_file=str(path), advertise="h:1")
    path.write_text(KRAFT_TWO.replace("=INTERNAL\n", "=CONTROLLER\n"))
    with pytest.raises(ConfigError, match=r"inter\.broker\.listener\.name"):
        _load(config_file=str(path))


async def _through(port: int) -> tuple[tuple[str, int], tuple[str, int], tuple[str, int]]:
    """(Metadata, FindCoordinator, DescribeCluster)'s broker address, asked on ``port``."""
    async with connect(port) as c:
        meta = await c.request(
            md.MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        coord = await c.request(fc.FindCoordinatorRequest(key_type=0, coordinator_keys=("g",)))
        cluster = await c.request(
            dcl.DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1)
        )
    (broker,) = meta.brokers
    (coordinator,) = coord.coordinators
    (described,) = cluster.brokers
    return (
        (broker.host, broker.port),
        (coordinator.host, coordinator.port),
        (described.host, described.port),
    )


async def test_each_listener_answers_with_its_own_advertised_address() -> None:
    cfg = _load(
        listeners="INSIDE://127.0.0.1:0,OUTSIDE://127.0.0.1:0,PLAIN://127.0.0.1:0",
        advertised_listeners="INSIDE://kafkad:9092,OUTSIDE://localhost:19092",
        listener_security_protocol_map="INSIDE:PLAINTEXT,OUTSIDE:PLAINTEXT,PLAIN:PLAINTEXT",
    )
    server = Server(cfg)
    async with trio.open_nursery() as nursery:
        first = await nursery.start(server.run)
        bound = server.bound_listeners
        assert list(bound) == ["INSIDE", "OUTSIDE", "PLAIN"]
        assert first == bound["INSIDE"]
        assert len({port for _, port in bound.values()}) == 3  # port 0 bound per listener
        inside = await _through(bound["INSIDE"][1])
        outside = await _through(bound["OUTSIDE"][1])
        plain = await _through(bound["PLAIN"][1])
        server.stop()
    assert inside == (("kafkad", 9092),) * 3
    assert outside == (("localhost", 19092),) * 3
    # No advertised entry and port 0: the bound address itself.
    assert plain == (("127.0.0.1", bound["PLAIN"][1]),) * 3


def test_advertised_listeners_alone_applies_to_the_default_listener() -> None:
    # Kafka: listeners defaults to PLAINTEXT://:9092; kafkad's default is 127.0.0.1:9092.
    assert _addresses(_load(advertised_listeners="PLAINTEXT://public:19092")) == [
        ("PLAINTEXT", "127.0.0.1", 9092, "public", 19092)
    ]


def test_the_simple_form_is_one_plaintext_listener() -> None:
    cfg = _load(listen="127.0.0.1:9092", advertise="localhost:9093")
    assert cfg.endpoints() == (
        Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092, "localhost", 9093),
    )


async def test_a_taken_port_on_the_second_listener_is_named() -> None:
    taken = trio.socket.socket()
    await taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    cfg = _load(
        listeners=f"A://127.0.0.1:0,B://127.0.0.1:{port}",
        listener_security_protocol_map="A:PLAINTEXT,B:PLAINTEXT",
    )
    with taken, pytest.raises((OSError, BaseExceptionGroup)) as err:
        async with trio.open_nursery() as nursery:
            await nursery.start(Server(cfg).run)
    # The second listener's address, not the first's (the one cli passes).
    assert startup_failure(err.value, "127.0.0.1:0") == (
        f"cannot listen on 127.0.0.1:{port}: address already in use"
    )


def test_the_ready_line_lists_every_bound_listener(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKAD_")}
    env |= {
        "KAFKAD_LISTENERS": "A://127.0.0.1:0,B://127.0.0.1:0",
        "KAFKAD_ADVERTISED_LISTENERS": "A://kafkad:9092",
        "KAFKAD_LISTENER_SECURITY_PROTOCOL_MAP": "A:PLAINTEXT,B:PLAINTEXT",
    }
    cmd = [sys.executable, "-m", "proxy.cli", "serve", "--data-dir", str(tmp_path / "d")]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
        finally:
            proc.terminate()
        assert proc.wait(timeout=30) == 0
    found = re.search(r"listeners=A://127\.0\.0\.1:(\d+)->kafkad:9092,B://127\.0\.0\.1:(\d+)", line)
    assert found is not None, line
    a, b = found.groups()
    assert a != b and f"->127.0.0.1:{b} " in line  # B advertises its bound port
    assert line.startswith(f"kafkad ready listen=127.0.0.1:{a} advertise=kafkad:9092 ")


def test_advertise_alone_sets_the_files_one_listener(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "listeners=HOST://0.0.0.0:9092\nlistener.security.protocol.map=HOST:PLAINTEXT\n"
    )
    assert _addresses(_load(config_file=str(path), advertise="public:19092")) == [
        ("HOST", "0.0.0.0", 9092, "public", 19092)
    ]
