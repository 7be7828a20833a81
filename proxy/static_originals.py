"""kafkad's static configuration as Kafka's ``originals``: the names a Kafka node's
server.properties would set, each with its string as given. DescribeConfigs shows these as
STATIC_BROKER_CONFIG (``DynamicBrokerConfig.staticBrokerConfigs``), whatever their value.

Besides the config file (Kafka's names, before ``proxy/kafka_properties.py`` translates them:
``log.retention.hours`` stays itself), the environment and ``--set``, the command line sets what
a Kafka node's server.properties must: ``--listen``/``--advertise`` are ``listeners`` /
``advertised.listeners`` (``PLAINTEXT://HOST:PORT``; kafkad's default listener when none is
given), the data dir is ``log.dirs`` (unless a config file's ``log.dir`` alone named it),
``node.id`` and ``process.roles`` (one combined node) are always set, as KRaft requires, and
``broker.id`` is ``node.id``'s string unless given (Kafka's ``populateSynonyms``).
"""

from __future__ import annotations

from collections.abc import Mapping

LISTENER_CONFIGS = ("listeners", "advertised.listeners")


def static_originals(
    given: Mapping[str, str],
    *,
    listen: str | None,
    advertise: str | None,
    adverts: str | None,
    data_dir: str | None,
    default_listen: str,
    default_data_dir: str,
    node_id: int,
) -> dict[str, str]:
    """``given``: the config file's, the environment's and ``--set``'s names, later sources
    winning. ``adverts``: the advertised listeners ``--advertise`` made of a config file's one
    listener (else None)."""
    out = dict(given)
    for name in LISTENER_CONFIGS:
        if not out.get(name, "").strip():  # empty: not given (proxy/config.py's rule)
            out.pop(name, None)
    if listen is not None or "listeners" not in out:  # --listen replaces a file's listeners
        if listen is not None:
            out.pop("advertised.listeners", None)
        out["listeners"] = f"PLAINTEXT://{(listen or default_listen).strip()}"
        if advertise:
            out["advertised.listeners"] = f"PLAINTEXT://{advertise.strip()}"
    elif adverts is not None:
        out["advertised.listeners"] = adverts
    if data_dir:
        out["log.dirs"] = data_dir
    elif "log.dirs" not in out and "log.dir" not in out:
        out["log.dirs"] = default_data_dir
    out.setdefault("node.id", str(node_id))
    out.setdefault("broker.id", out["node.id"])  # KafkaConfig.populateSynonyms
    out.setdefault("process.roles", "broker,controller")
    return out
