"""A stock Kafka ``server.properties`` read as kafkad's configuration.

Kafka's names are mapped where kafkad has the concept: ``listeners``/``advertised.listeners``/
``listener.security.protocol.map`` are kafkad's own broker configs too (several named client
listeners, checked in ``proxy/listeners.py``; the controller listener is left out of them),
``log.dirs``/``log.dir`` the data directory, ``log.retention.hours``/``minutes`` and
``log.roll.hours`` their ``.ms`` forms (Kafka's precedence: ms, then minutes, then hours),
``broker.id`` ``node.id``. KRaft settings of a single node are accepted and checked for sense
(``process.roles`` has the broker role; a combined node names its controller listener in
``listeners``, a broker-only node leaves it to the controllers; ``controller.quorum.voters``
is this node alone...); settings that only tune Kafka's threads and buffers are accepted and
ignored, as is every other config Kafka 4.2 defines that kafkad has no use for
(proxy/kafka_only_configs.py: checked by its type and range; DescribeConfigs shows it STATIC),
and replication settings must say 1 (one node). Every other name is passed on, so
that the caller reports all unknown names at once.

Deviations: a SASL client listener is refused (PLAINTEXT and SSL are served); the
controller listener is not bound (kafkad has no controller quorum to serve).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from proxy.kafka_only_configs import KAFKA_ONLY_CONFIGS, parse_value
from proxy.listeners import ListenerError, listener_map

# Tuning Kafka's JVM broker; meaningless for kafkad's one trio process.
IGNORED = frozenset(
    {
        "num.network.threads",
        "num.io.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "background.threads",
        "queued.max.requests",
        "controller.quorum.election.timeout.ms",
        "controller.quorum.fetch.timeout.ms",
        "metadata.log.dir",
    }
)
# Replication on one node: only 1 means anything.
MUST_BE_ONE = frozenset(
    {
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "share.coordinator.state.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
    }
)
KRAFT = frozenset(
    {
        "process.roles",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "controller.listener.names",
        "inter.broker.listener.name",
        "log.dirs",
        "log.dir",
        "broker.id",
        "zookeeper.connect",
    }
)
_TIME_ALIASES = {
    "log.retention.ms": (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "log.roll.ms": (("log.roll.hours", 3_600_000),),
}


@dataclass
class Translated:
    values: dict[str, str] = field(default_factory=dict)  # kafkad broker configs and unknowns
    controllers: frozenset[str] = frozenset()  # controller.listener.names
    inter_broker: str | None = None  # inter.broker.listener.name
    data_dir: str | None = None
    errors: list[str] = field(default_factory=list)


def _time_aliases(props: dict[str, str], out: Translated, source: str) -> None:
    for target, aliases in _TIME_ALIASES.items():
        for name, unit_ms in aliases:
            if name not in props:
                continue
            value = props.pop(name)
            try:
                ms = int(value.strip()) * unit_ms
            except ValueError:
                out.errors.append(f"{name}={value} from {source}: must be a whole number")
                continue
            if target not in props and target not in out.values:
                out.values[target] = str(-1 if ms < 0 else ms)


def _complainer(props: dict[str, str], out: Translated, source: str) -> Callable[[str, str], None]:
    def bad(name: str, why: str) -> None:
        out.errors.append(f"{name}={props.get(name, '')} from {source}: {why}")

    return bad


def _quorum(props: dict[str, str], out: Translated, source: str) -> None:
    """node.id/broker.id, process.roles and the controller quorum: this node alone."""
    bad = _complainer(props, out, source)
    node_id = props.get("node.id", out.values.get("node.id"))
    if "broker.id" in props:
        if node_id is None:
            out.values["node.id"] = node_id = props["broker.id"]
        elif props["broker.id"].strip() != node_id.strip():
            bad("broker.id", f"differs from node.id={node_id}")
    if "zookeeper.connect" in props:
        bad("zookeeper.connect", "ZooKeeper mode is gone (Kafka 4); use KRaft settings or none")
    if "process.roles" in props:
        roles = {r.strip() for r in props["process.roles"].split(",") if r.strip()}
        if "broker" not in roles or not roles <= {"broker", "controller"}:
            bad("process.roles", "kafkad is one combined node: broker,controller (or broker)")
    if "controller.quorum.voters" in props:
        voters = [v.strip() for v in props["controller.quorum.voters"].split(",") if v.strip()]
        ids = [v.partition("@")[0] for v in voters]
        if len(voters) != 1 or "@" not in voters[0]:
            bad("controller.quorum.voters", "kafkad is one node: give exactly one ID@HOST:PORT")
        elif node_id is not None and ids[0] != node_id.strip():
            bad("controller.quorum.voters", f"the voter is not this node (node.id={node_id})")
    if "controller.quorum.bootstrap.servers" in props:
        servers = [s for s in props["controller.quorum.bootstrap.servers"].split(",") if s.strip()]
        if len(servers) != 1:
            bad("controller.quorum.bootstrap.servers", "kafkad is one node: give one HOST:PORT")


def _controller_listeners(props: dict[str, str], out: Translated, source: str) -> None:
    """The controller listener's place in ``listeners`` and ``inter.broker.listener.name``;
    the client listeners themselves are checked in ``proxy/listeners.py``."""
    bad = _complainer(props, out, source)
    try:
        listeners = listener_map(props.get("listeners", ""), "listeners")
    except ListenerError as exc:
        out.errors.append(f"{exc} (from {source})")
        return
    controllers = frozenset(
        n.strip().upper()
        for n in props.get("controller.listener.names", "").split(",")
        if n.strip()
    )
    out.controllers = controllers
    roles = {r.strip() for r in props.get("process.roles", "broker,controller").split(",")}
    if not listeners:
        return
    missing = controllers - listeners.keys()
    # A broker-only node's controller listener lives on the controllers (Kafka requires it
    # absent from listeners then); a combined node binds it itself.
    if missing and "controller.listener.names" in props and "controller" in roles:
        bad("controller.listener.names", f"{', '.join(sorted(missing))} not in listeners")
    clients = [name for name in listeners if name not in controllers]
    if "inter.broker.listener.name" in props:
        inter = props["inter.broker.listener.name"].strip().upper()
        if inter not in clients:
            bad("inter.broker.listener.name", f"must be a client listener ({', '.join(clients)})")
        out.inter_broker = inter


def _data_dir(props: dict[str, str], out: Translated, source: str) -> None:
    bad = _complainer(props, out, source)
    dirs = props.get("log.dirs", props.get("log.dir"))
    if dirs is not None:
        paths = [d.strip() for d in dirs.split(",") if d.strip()]
        if len(paths) != 1:
            bad("log.dirs" if "log.dirs" in props else "log.dir", "kafkad has one data directory")
        else:
            out.data_dir = paths[0]


def translate(props: dict[str, str], source: str) -> Translated:
    """Kafka's names in ``props`` (a parsed server.properties) turned into kafkad's."""
    out = Translated()
    rest = dict(props)
    _time_aliases(rest, out, source)
    _quorum(rest, out, source)
    _controller_listeners(rest, out, source)
    _data_dir(rest, out, source)
    for name, value in rest.items():
        if name in KAFKA_ONLY_CONFIGS and name not in MUST_BE_ONE:
            try:  # Kafka's config kafkad has no use for: checked, kept in the originals only
                parse_value(name, value)
            except ValueError as exc:
                out.errors.append(f"{name}={value} from {source}: {exc}")
            continue
        if name in IGNORED or name in KRAFT:
            continue
        if name in MUST_BE_ONE:
            if value.strip() != "1":
                out.errors.append(f"{name}={value} from {source}: kafkad is one node, must be 1")
            continue
        out.values[name] = value
    return out
