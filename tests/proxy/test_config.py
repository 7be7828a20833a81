from __future__ import annotations

import re
from pathlib import Path

import pytest

import proxy.broker_config_defs as broker_config_defs
import proxy.config as config_module
from coordinator.consumer_group.assignors import assignor_names
from proxy.config import BrokerConfig, resolve_values
from proxy.properties_file import ConfigError, parse_properties
from tests.proxy.harness import broker_config


def test_defaults_are_kafkas() -> None:
    v = resolve_values({}, {}, {})
    assert v["auto.create.topics.enable"] is True
    assert v["num.partitions"] == 1
    assert v["group.initial.rebalance.delay.ms"] == 3000
    assert v["offsets.topic.num.partitions"] == 50
    assert v["transaction.state.log.num.partitions"] == 50
    assert v["message.max.bytes"] == 1048588


def test_later_sources_win() -> None:
    v = resolve_values(
        {"num.partitions": "3", "auto.create.topics.enable": "false"},
        {"KAFKAD_NUM_PARTITIONS": "5", "UNRELATED": "x"},
        {"auto.create.topics.enable": "true"},
    )
    assert v["num.partitions"] == 5
    assert v["auto.create.topics.enable"] is True


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"no.such.config": "1"}, "unknown config"),
        ({"num.partitions": "many"}, "num.partitions"),
        ({"num.partitions": "0"}, "num.partitions"),
        ({"auto.create.topics.enable": "maybe"}, "auto.create.topics.enable"),
        ({"compression.type": "brotli"}, "compression.type"),
    ],
)
def test_bad_values_are_refused(source: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        resolve_values({}, {}, source)


def test_properties_file_syntax() -> None:
    text = "# comment\n! also\n\nnum.partitions = 4\nlog.retention.ms:1000\n"
    assert parse_properties(text) == {"num.partitions": "4", "log.retention.ms": "1000"}
    assert parse_properties("just words") == {"just": "words"}  # blanks separate, as in Java


def test_java_properties_syntax_in_full() -> None:
    text = (
        "  key1   value one  \n"  # leading blanks skipped, trailing kept
        "key2\t:\tv2\n"
        "key3 = a \\\n"  # a continuation: the next line's leading blanks go
        "      b\\\n"
        "   c\n"
        "key\\=4=x\\ty\\u00e9\\\\\n"  # escaped separator, \t, \\u, a literal backslash
        "empty\n"
        "  # an indented comment\n"
        "dup=1\ndup=2\n"
        "last=ends with a continuation\\"
    )
    assert parse_properties(text) == {
        "key1": "value one  ",
        "key2": "v2",
        "key3": "a b" + "c",
        "key=4": "x\ty\u00e9\\",
        "empty": "",
        "dup": "2",
        "last": "ends with a continuation",
    }
    with pytest.raises(ConfigError, match="line 1: malformed"):
        parse_properties("a=\\uZZ")


def test_listen_and_advertise() -> None:
    cfg = broker_config(advertise="localhost:9092")
    assert (cfg.listen_host, cfg.listen_port) == ("127.0.0.1", 0)
    assert (cfg.advertised_host, cfg.advertised_port) == ("localhost", 9092)
    with pytest.raises(ConfigError):
        broker_config(listen="nohost")


def test_flush_every_append_maps_to_log_config() -> None:
    cfg = broker_config({"log.flush.interval.messages": "1"})
    assert cfg.log_config().flush_every_append is True


def test_flush_intervals_map_to_log_config_as_given() -> None:
    """Issue 23.12: any value means what it says (not only 1), for the broker and a topic."""
    from storage.topic_config import topic_log_config, validate_overrides

    cfg = broker_config(
        {"log.flush.interval.messages": "500", "log.flush.interval.ms": "2000"}
    ).log_config()
    assert (cfg.flush_messages, cfg.flush_ms, cfg.flush_every_append) == (500, 2000, False)
    topic = topic_log_config(cfg, {"flush.messages": "7", "flush.ms": "30"})
    assert (topic.flush_messages, topic.flush_ms) == (7, 30)
    assert validate_overrides({"flush.messages": "0"}) is not None
    assert validate_overrides({"flush.ms": "-1"}) is not None


KRAFT_COMBINED = """\
# a single combined KRaft node, as in Kafka's config/kraft/server.properties
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL
num.network.threads=3
socket.send.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def _from_file(tmp_path: Path, text: str, **cli: str) -> BrokerConfig:
    path = tmp_path / "server.properties"
    path.write_text(text)
    return broker_config(
        listen=cli.get("listen"),
        advertise=cli.get("advertise"),
        data_dir=cli.get("data_dir"),
        config_file=str(path),
    )


def test_a_stock_kraft_server_properties_works(tmp_path: Path) -> None:
    cfg = _from_file(tmp_path, KRAFT_COMBINED)
    assert (cfg.listen_host, cfg.listen_port) == ("0.0.0.0", 9092)
    assert (cfg.advertised_host, cfg.advertised_port) == ("localhost", 9092)
    assert cfg.data_dir == "/tmp/kraft-combined-logs"
    assert cfg.get("log.retention.ms") == 168 * 3600 * 1000
    assert cfg.get("node.id") == 1 and cfg.get("log.segment.bytes") == 1073741824
    mine = _from_file(tmp_path, KRAFT_COMBINED, listen="127.0.0.1:0", data_dir="memory://")
    assert (mine.listen_host, mine.listen_port, mine.data_dir) == ("127.0.0.1", 0, "memory://")


def test_retention_units_follow_kafkas_precedence(tmp_path: Path) -> None:
    both = "log.retention.hours=1\nlog.retention.minutes=2\nlog.roll.hours=3\n"
    cfg = _from_file(tmp_path, both, listen="127.0.0.1:0")
    assert cfg.get("log.retention.ms") == 120_000 and cfg.get("log.roll.ms") == 3 * 3_600_000
    cfg = _from_file(tmp_path, both + "log.retention.ms=5\n", listen="127.0.0.1:0")
    assert cfg.get("log.retention.ms") == 5


def test_kraft_settings_that_make_no_sense_are_all_reported(tmp_path: Path) -> None:
    text = (
        "process.roles=controller\n"
        "node.id=1\n"
        "controller.quorum.voters=1@a:9093,2@b:9093\n"
        "listeners=PLAINTEXT://:9092,SSL://:9094,CONTROLLER://:9093\n"
        "controller.listener.names=CONTROLLER\n"
        "zookeeper.connect=localhost:2181\n"
        "offsets.topic.replication.factor=3\n"
        "num.partitons=2\n"
    )
    with pytest.raises(ConfigError) as err:
        _from_file(tmp_path, text, listen="127.0.0.1:0")
    message = str(err.value)
    assert "\n" not in message
    for needle in (
        "process.roles=controller",
        "give exactly one ID@HOST:PORT",
        "ZooKeeper mode is gone",
        "offsets.topic.replication.factor=3",
        "unknown config num.partitons",
    ):
        assert needle in message, (needle, message)


def test_a_tls_listener_and_a_foreign_voter_are_refused(tmp_path: Path) -> None:
    text = (
        "node.id=2\ncontroller.quorum.voters=1@localhost:9093\n"
        "listeners=SASL_SSL://:9093\nbroker.id=3\nlog.dirs=/a,/b\n"
    )
    with pytest.raises(ConfigError) as err:
        _from_file(tmp_path, text)
    for needle in (
        "not this node (node.id=2)",
        "differs",
        "one data",
    ):
        assert needle in str(err.value), (needle, str(err.value))


def test_range_errors_name_the_config_and_source_all_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        resolve_values(
            {"log.segment.bytes": "1048575"},  # Kafka 4.2: atLeast(1024 * 1024)
            {"KAFKAD_MESSAGE_MAX_BYTES": "-1", "KAFKAD_NO_SUCH": "1"},
            {"socket.request.max.bytes": "0", "node.id": "-3", "log.retention.ms": "-2"},
        )
    message = str(err.value)
    for needle in (
        "log.segment.bytes=1048575 from config file: must be at least 1048576",
        "message.max.bytes=-1 from environment variable KAFKAD_MESSAGE_MAX_BYTES: must be at "
        "least 0",
        "unknown variable KAFKAD_NO_SUCH in the environment",
        "socket.request.max.bytes=0 from --set: must be at least 1",
        "node.id=-3 from --set: must be at least 0",
        "log.retention.ms=-2 from --set: must be -1 (unlimited) or at least 1",
    ):
        assert needle in message, (needle, message)
    assert resolve_values({}, {}, {"log.retention.ms": "-1"})["log.retention.ms"] == -1
    assert resolve_values({}, {"KAFKAD_BOOTSTRAP": "x:1"}, {})  # a test tool's, not refused


def test_a_config_added_with_plain_int_still_reads_well(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(broker_config_defs.BROKER_CONFIGS, "some.new.ms", (int, "5"))
    with pytest.raises(ConfigError, match=r"some\.new\.ms=soon from --set: must be a whole number"):
        resolve_values({}, {}, {"some.new.ms": "soon"})


def test_only_javas_line_terminators_end_a_line() -> None:
    # \f is a blank to java.util.Properties, and \v, \x1c and \x85 (latin-1 NEL) are value
    # characters: none of them ends a line (str.splitlines would split at each).
    text = "a=x\fy\nb\fv\nc=1\x85 2\x1c3\vz\r\nd=cr\re=lf\n"
    assert parse_properties(text) == {
        "a": "x\fy",
        "b": "v",
        "c": "1\x85 2\x1c3\vz",
        "d": "cr",
        "e": "lf",
    }


def test_values_are_trimmed_as_kafkas_configdef_does(tmp_path: Path) -> None:
    # A properties file keeps a value's trailing blanks; Kafka's ConfigDef trims before parsing.
    text = "log.message.timestamp.type=LogAppendTime \t\nlog.cleanup.policy=compact \n"
    cfg = _from_file(tmp_path, text, listen="127.0.0.1:0")
    assert cfg.get("log.message.timestamp.type") == "LogAppendTime"
    assert cfg.get("log.cleanup.policy") == "compact"


def test_a_broker_only_kraft_node_leaves_its_controller_listener_to_the_controllers(
    tmp_path: Path,
) -> None:
    # Kafka's config/kraft/broker.properties: the controller listener is named but not bound
    # here (Kafka requires it absent from listeners on a broker-only node).
    text = (
        "process.roles=broker\nnode.id=2\ncontroller.quorum.bootstrap.servers=localhost:9093\n"
        "listeners=PLAINTEXT://localhost:9092\ninter.broker.listener.name=PLAINTEXT\n"
        "advertised.listeners=PLAINTEXT://localhost:9092\ncontroller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
    )
    cfg = _from_file(tmp_path, text)
    assert (cfg.listen_host, cfg.listen_port, cfg.get("node.id")) == ("localhost", 9092, 2)
    combined = text.replace("process.roles=broker", "process.roles=broker,controller")
    with pytest.raises(ConfigError, match="CONTROLLER not in listeners"):
        _from_file(tmp_path, combined)


def test_values_kafkas_config_defs_accept_are_accepted() -> None:
    # No validator in Kafka's ConfigDef (GroupCoordinatorConfig, ServerLogConfigs): a
    # server.properties Kafka starts with must not stop kafkad.
    v = resolve_values(
        {
            "group.initial.rebalance.delay.ms": "-1",
            "group.min.session.timeout.ms": "-5",
            "log.retention.bytes": "-2",
            "connections.max.idle.ms": "-1",
        },
        {},
        {},
    )
    assert v["group.initial.rebalance.delay.ms"] == -1 and v["log.retention.bytes"] == -2


# Refused on purpose by the tests that check unknown variables are refused.
_DELIBERATELY_UNKNOWN = {"KAFKAD_NO_SUCH", "KAFKAD_NUM_PARTITION"}


def test_every_kafkad_variable_the_repo_sets_is_allowed() -> None:
    # The test tools pass their own KAFKAD_ variables down to the brokers they start (they
    # inherit the environment): one missing from TOOL_ENV stops every such broker.
    repo = Path(__file__).resolve().parents[2]
    skip = {".git", ".venv", "node_modules", ".mypy_cache", ".ruff_cache", ".hypothesis"}
    files = [
        p
        for p in repo.rglob("*")
        if p.is_file()
        and not skip & set(p.relative_to(repo).parts)
        and p.suffix in {".py", ".sh", ".js", ".yml", ".yaml", ".md", ".toml", ""}
    ]
    used = set()
    for path in files:
        try:
            used |= set(re.findall(r"KAFKAD_[A-Z0-9_]*[A-Z0-9]", path.read_text()))
        except UnicodeDecodeError:
            continue
    allowed = config_module.CLI_ENV | config_module.TOOL_ENV | _DELIBERATELY_UNKNOWN
    allowed |= {config_module.env_name(n) for n in broker_config_defs.BROKER_CONFIGS}
    allowed |= {config_module.env_name(n) for n in config_module.KAFKA_ONLY_NAMES}
    assert "KAFKAD_SOAK_SECONDS" in used  # the scan sees the compat tests
    assert used - allowed == set()


def test_a_listener_without_a_host_is_advertised_as_this_machine_as_kafka_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka (ListenerInfo.withWildcardHostnamesResolved) advertises PLAINTEXT://:9092 as the
    # canonical host name; only an explicit 0.0.0.0 is refused.
    monkeypatch.setattr("proxy.listeners.socket.getfqdn", lambda: "broker.example")
    cfg = _from_file(tmp_path, "listeners=PLAINTEXT://:9092\n")
    assert (cfg.listen_host, cfg.advertised_host, cfg.advertised_port) == (
        "0.0.0.0",
        "broker.example",
        9092,
    )
    text = "listeners=PLAINTEXT://:9092\nadvertised.listeners=PLAINTEXT://:19092\n"
    cfg = _from_file(tmp_path, text)
    assert (cfg.advertised_host, cfg.advertised_port) == ("broker.example", 19092)
    with pytest.raises(ConfigError, match=r"needs an advertised\.listeners entry"):
        _from_file(tmp_path, "listeners=PLAINTEXT://0.0.0.0:9092\n")


def test_a_bad_jaas_config_never_shows_its_passwords() -> None:
    """Kafka's ConfigException shows a PASSWORD config's value as [hidden]."""
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_alice="top-secret-pw;'
    )
    for name in ("plain.sasl.jaas.config", "listener.name.sasl_plaintext.plain.sasl.jaas.config"):
        with pytest.raises(ConfigError) as exc:
            resolve_values({}, {}, {name: jaas})
        assert "top-secret" not in str(exc.value)
        assert f"{name}=[hidden] from --set: cannot read the options at character" in str(exc.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"group.consumer.heartbeat.interval.ms": "50000"},
            "group.consumer.heartbeat.interval.ms must be less than or equal to "
            "group.consumer.max.heartbeat.interval.ms",
        ),
        (
            {"group.consumer.session.timeout.ms": "1000"},
            "group.consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms",
        ),
        (
            {
                "group.consumer.heartbeat.interval.ms": "9000",
                "group.consumer.session.timeout.ms": "9000",
                "group.consumer.min.session.timeout.ms": "1000",
            },
            "group.consumer.heartbeat.interval.ms must be less than "
            "group.consumer.session.timeout.ms",
        ),
        (
            {"group.coordinator.rebalance.protocols": "consumer"},
            "Disabling the 'classic' protocol is not supported.",
        ),
        ({"group.coordinator.rebalance.protocols": "classic,share"}, "share is not"),
        ({"group.consumer.assignors": "sticky"}, "sticky is not an assignor"),
        # Kafka's ValidList (4.2): no duplicates, no empty item, not empty; names case-sensitive
        (
            {"group.consumer.assignors": "uniform,range,uniform"},
            "Configuration 'group.consumer.assignors' values must not be duplicated.",
        ),
        (
            {"group.consumer.assignors": "uniform,,range"},
            "Configuration 'group.consumer.assignors' values must not be empty.",
        ),
        (
            {"group.consumer.assignors": " "},
            "Configuration 'group.consumer.assignors' must not be empty. "
            "Valid values include: any non-empty value",
        ),
        (
            {"group.coordinator.rebalance.protocols": "classic,consumer,classic"},
            "values must not be duplicated.",
        ),
        (
            {"group.coordinator.rebalance.protocols": "CLASSIC,consumer"},
            "Invalid value CLASSIC for configuration group.coordinator.rebalance.protocols: "
            "String must be one of: consumer, classic, share, streams",
        ),
        (  # ValidList checks each item in turn: the unknown one before the empty one
            {"group.coordinator.rebalance.protocols": "classic,foo,"},
            "Invalid value foo for configuration",
        ),
        (
            {"group.coordinator.rebalance.protocols": ""},
            "Configuration 'group.coordinator.rebalance.protocols' must not be empty. Valid "
            "values include: [consumer, classic, share, streams]",
        ),
    ],
)
def test_consumer_group_configs_are_checked(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        broker_config(overrides)


def test_consumer_group_configs() -> None:
    cfg = broker_config(
        {"group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor"}
    )
    # shown as given (Kafka's LIST), served as the assignor that class is
    assert (
        cfg.get("group.consumer.assignors")
        == "org.apache.kafka.coordinator.group.assignor.RangeAssignor"
    )
    assert assignor_names(cfg.get("group.consumer.assignors")) == ("range",)
    assert cfg.get("group.coordinator.rebalance.protocols") == "classic,consumer"


def test_listener_prefixed_names_follow_kafkas_one_rule() -> None:
    """One parser of ``listener.name.<l>.<config>`` (Kafka's ListenerConfigRegex, whose
    listener part may be empty) serves the start-up configs, the dynamic ones and DescribeConfigs;
    a listener's connection quota override is one of the per-listener configs."""
    from proxy.broker_config_types import listener_base, listener_prefixed

    assert listener_prefixed("listener.name..max.connections") == ("", "max.connections")
    assert listener_prefixed("listener.name.ssl.ssl.key.password") == ("ssl", "ssl.key.password")
    assert listener_prefixed("listener.name.ssl") is None
    assert listener_base("listener.name.sasl_ssl.plain.sasl.jaas.config") == "sasl.jaas.config"
    v = resolve_values(
        {},
        {},
        {"listener.name..max.connections": "5", "listener.name..ssl.client.auth": "required"},
    )
    assert (v["listener.name..max.connections"], v["listener.name..ssl.client.auth"]) == (
        5,
        "required",
    )
    with pytest.raises(ConfigError, match=r"listener.name.ext.max.connections=-1 from --set"):
        resolve_values({}, {}, {"listener.name.ext.max.connections": "-1"})
