"""A stock Kafka ``server.properties`` read as kafkad's configuration.

Kafka's names are mapped where kafkad has the concept: ``listeners``/``advertised.listeners``
(the one client listener) become ``--listen``/``--advertise`` (a listener without a host,
``PLAINTEXT://:9092``, is advertised as this machine's host name, as Kafka does),
``log.dirs``/``log.dir`` the data directory, ``log.retention.hours``/``minutes`` and
``log.roll.hours`` their ``.ms`` forms (Kafka's precedence: ms, then minutes, then hours),
``broker.id`` ``node.id``. KRaft settings of a single node are accepted and checked for sense
(``process.roles`` has the broker role; a combined node names its controller listener in
``listeners``, a broker-only node leaves it to the controllers; ``controller.quorum.voters``
is this node alone...); settings that only tune Kafka's threads and buffers are accepted and
ignored, and replication settings must say 1 (one node). Every other name is passed on, so
that the caller reports all unknown names at once.

Deviations: kafkad has one listener (the security-protocol issue may add more), so a file with
two client listeners, or a non-PLAINTEXT one, is refused; the controller listener is not bound
(kafkad has no controller quorum to serve).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field

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
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "listeners",
        "advertised.listeners",
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
    listen: str | None = None
    advertise: str | None = None
    data_dir: str | None = None
    errors: list[str] = field(default_factory=list)


def _listener_map(text: str) -> dict[str, str]:
    """``NAME://host:port,...`` -> {NAME: "host:port"}; malformed entries raise ValueError."""
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, address = item.partition("://")
        if not sep or not name:
            raise ValueError(f"{item!r} is not NAME://HOST:PORT")
        out[name.upper()] = address
    return out


def _protocol_map(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep:
            raise ValueError(f"{item!r} is not NAME:PROTOCOL")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


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


def _client_listener(props: dict[str, str], out: Translated, source: str) -> None:
    """The one PLAINTEXT client listener and its advertised address."""
    bad = _complainer(props, out, source)
    try:
        protocols = _protocol_map(props.get("listener.security.protocol.map", ""))
        listeners = _listener_map(props.get("listeners", ""))
        advertised = _listener_map(props.get("advertised.listeners", ""))
    except ValueError as exc:
        out.errors.append(f"listeners from {source}: {exc}")
        return
    controllers = {
        n.strip().upper()
        for n in props.get("controller.listener.names", "").split(",")
        if n.strip()
    }
    roles = {r.strip() for r in props.get("process.roles", "broker,controller").split(",")}
    if listeners:
        missing = controllers - listeners.keys()
        # A broker-only node's controller listener lives on the controllers (Kafka requires it
        # absent from listeners then); a combined node binds it itself.
        if missing and "controller.listener.names" in props and "controller" in roles:
            bad("controller.listener.names", f"{', '.join(sorted(missing))} not in listeners")
        clients = [name for name in listeners if name not in controllers]
        if len(clients) != 1:
            bad("listeners", f"kafkad has one client listener, found {len(clients)}")
            return
        (name,) = clients
        protocol = protocols.get(name, name)
        if protocol != "PLAINTEXT":
            bad("listeners", f"listener {name} is {protocol}; kafkad serves PLAINTEXT only")
        inter = props.get("inter.broker.listener.name", name).strip().upper()
        if inter != name:
            bad("inter.broker.listener.name", f"must be the client listener {name}")
        host, _, port = listeners[name].rpartition(":")
        out.listen = f"{host or '0.0.0.0'}:{port}"
        out.advertise = _resolve_blank_host(
            advertised.get(name, listeners[name] if not host else None)
        )
    elif advertised:
        clients = [name for name in advertised if name not in controllers]
        if len(clients) == 1:
            out.advertise = _resolve_blank_host(advertised[clients[0]])


def _resolve_blank_host(address: str | None) -> str | None:
    """Kafka advertises a listener without a host (``PLAINTEXT://:9092``) as the machine's
    canonical host name (ListenerInfo.withWildcardHostnamesResolved); an explicit 0.0.0.0 is
    refused later, as Kafka refuses it."""
    if address is None:
        return None
    host, sep, port = address.rpartition(":")
    if sep and not host.strip("[]"):
        return f"{socket.getfqdn()}:{port}"
    return address


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
    _client_listener(rest, out, source)
    _data_dir(rest, out, source)
    for name, value in rest.items():
        if name in IGNORED or name in KRAFT:
            continue
        if name in MUST_BE_ONE:
            if value.strip() != "1":
                out.errors.append(f"{name}={value} from {source}: kafkad is one node, must be 1")
            continue
        out.values[name] = value
    return out
