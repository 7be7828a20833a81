"""Connection quota configs (Kafka's SocketServerConfigs), parsed and checked as Kafka checks
them; the runtime is ``proxy/connection_quotas.py``.

``max.connections`` (broker-wide) and ``max.connection.creation.rate`` may be overridden per
listener (``listener.name.<listener>.max.connections``, Kafka's ListenerConnectionQuota, which
falls back to the broker-wide value). ``max.connections.per.ip`` and
``max.connections.per.ip.overrides`` (``host:n,ip:n``) apply to every listener. All are
dynamic (Kafka's ``SocketServer.ReconfigurableConfigs`` and ``ListenerReconfigurableConfigs``).

Kafka's checks, with its texts:

* the types: INT at least 0 (``ConfigDef``); a listener-prefixed name is checked as its base
  name (``DynamicBrokerConfig.validateConfigTypes``);
* ``KafkaConfig.validateValues`` (at start-up, and on every dynamic change: the whole config is
  rebuilt): ``max.connections.per.ip`` 0 needs overrides, the overrides parse
  (``Csv.parseCsvMap``, each value ``toInt``) and name hosts of valid characters;
* a dynamic change that changes a listener's effective ``max.connections`` or
  ``max.connection.creation.rate`` to 0 is refused (``ListenerConnectionQuota
  .validateReconfiguration``, wrapped by ``processReconfiguration``'s ConfigException).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from proxy.broker_config_types import listener_base
from wire.values import INT_MAX

MAX_CONNECTIONS = "max.connections"
MAX_CONNECTIONS_PER_IP = "max.connections.per.ip"
MAX_CONNECTIONS_PER_IP_OVERRIDES = "max.connections.per.ip.overrides"
MAX_CONNECTION_CREATION_RATE = "max.connection.creation.rate"
# SocketServer.ReconfigurableConfigs / ListenerReconfigurableConfigs
BROKER_WIDE = (
    MAX_CONNECTIONS_PER_IP,
    MAX_CONNECTIONS_PER_IP_OVERRIDES,
    MAX_CONNECTIONS,
    MAX_CONNECTION_CREATION_RATE,
)
PER_LISTENER = (MAX_CONNECTIONS, MAX_CONNECTION_CREATION_RATE)

_HOST_CHARACTERS = re.compile(r"[0-9a-zA-Z\-%._:]*")  # Kafka's Utils.VALID_HOST_CHARACTERS


def quota_base(name: str) -> str | None:
    """``max.connections`` for ``listener.name.<listener>.max.connections`` (and the rate's):
    a listener's connection quota override's base config; None for any other name."""
    base = listener_base(name)
    return base if base in PER_LISTENER else None


def _java_int(text: str) -> int:
    """Java's ``Integer.parseInt`` (Scala's ``toInt``), with its NumberFormatException text."""
    if not re.fullmatch(r"[+-]?[0-9]+", text) or not -(2**31) <= int(text) <= INT_MAX:
        raise ValueError(f'For input string: "{text}"')
    return int(text)


def parse_overrides(text: str) -> dict[str, int]:
    """Kafka's ``maxConnectionsPerIpOverrides``: ``Csv.parseCsvMap`` (split at commas with the
    spaces around them, each item at its last colon, both sides trimmed), each count an int.
    Raises ValueError with Kafka's message."""
    items: dict[str, str] = {}
    if text:
        parts = re.split(r"\s*,\s*", text)
        while parts and parts[-1] == "":  # Java's split drops trailing empty strings
            parts.pop()
        for part in parts:
            colon = part.rfind(":")
            if colon < 0:
                raise ValueError(
                    f"Error parsing configuration property '{MAX_CONNECTIONS_PER_IP_OVERRIDES}': "
                    f"begin 0, end -1, length {len(part)}"
                )
            items[part[:colon].strip()] = part[colon + 1 :].strip()
    out = {host: _java_int(count) for host, count in items.items()}
    if invalid := [h for h in out if not _HOST_CHARACTERS.fullmatch(h)]:
        raise ValueError(
            f"{MAX_CONNECTIONS_PER_IP_OVERRIDES} contains invalid addresses : {','.join(invalid)}"
        )
    return out


def overrides_parser(v: str) -> str:
    """The config's own parser: Kafka's STRING (trimmed); ``validate_values`` checks it."""
    return v.strip()


def validate_values(values: Mapping[str, Any]) -> str | None:
    """``KafkaConfig.validateValues``' connection checks of the effective values: the message
    of its exception, or None."""
    error: str | None = None
    try:
        overrides = parse_overrides(values[MAX_CONNECTIONS_PER_IP_OVERRIDES])
    except ValueError as exc:
        overrides, error = {}, str(exc)
    if values[MAX_CONNECTIONS_PER_IP] == 0 and error is None and not overrides:
        return (
            f"requirement failed: {MAX_CONNECTIONS_PER_IP} can be set to zero only if "
            f"{MAX_CONNECTIONS_PER_IP_OVERRIDES} property is set."
        )
    return error


def listener_limit(values: Mapping[str, Any], listener: str, name: str) -> int:
    """A listener's effective ``max.connections``/``max.connection.creation.rate``: its
    ``listener.name.<listener>.`` override (the name lower-cased), else the broker-wide one."""
    prefixed = f"listener.name.{listener.lower()}.{name}"
    value = values.get(prefixed, values.get(name, INT_MAX))
    return int(value)


def reconfiguration_error(
    old: Mapping[str, Any], new: Mapping[str, Any], listeners: Iterable[str]
) -> str | None:
    """Kafka's ListenerConnectionQuota.validateReconfiguration for each listener whose
    effective limits change, in the words ``processReconfiguration`` wraps it in."""
    for listener in listeners:
        before = [listener_limit(old, listener, n) for n in PER_LISTENER]
        after = [listener_limit(new, listener, n) for n in PER_LISTENER]
        if before == after:
            continue
        for name, value in zip(PER_LISTENER, after, strict=True):
            if value <= 0:
                return (
                    "Invalid value org.apache.kafka.common.config.ConfigException: "
                    f"Invalid {name} {value} for configuration Invalid dynamic configuration"
                )
    return None
