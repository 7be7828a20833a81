"""`kafka.*` options: the Java client's settings, as a Spark job gives them, turned into
librdkafka's.

Spark's Kafka connector hands `kafka.*` options to the Java client. librdkafka understands most
of the same names itself (security.protocol, sasl.mechanism, ssl.endpoint.identification.
algorithm, session.timeout.ms, max.partition.fetch.bytes, ...); those pass through unchanged
and librdkafka checks them when the query starts. This module translates the ones it names
differently (fetch.max.wait.ms -> fetch.wait.max.ms, ...) or spells differently (an empty
ssl.endpoint.identification.algorithm, Java's "no host name check", is librdkafka's "none"),
the SASL credentials inside `sasl.jaas.config`, and PEM trust/key stores; and refuses, naming
them, the Java settings that have no librdkafka equivalent (JKS stores, OAUTHBEARER login
modules, default.api.timeout.ms, max.block.ms), rather than dropping them.

Pure: no Spark, no Kafka client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping


class OptionError(ValueError):
    """A kafka.* option with no librdkafka equivalent (`pipeline.options` re-raises it as its
    OptionError)."""


RENAMED = {
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "max.request.size": "message.max.bytes",
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
    "ssl.keystore.key": "ssl.key.pem",
}
NO_EQUIVALENT = {
    "default.api.timeout.ms": "librdkafka has no such timeout",
    "max.block.ms": "librdkafka's produce() does not block",
    "sasl.login.callback.handler.class": "Java classes cannot be loaded",
    "sasl.client.callback.handler.class": "Java classes cannot be loaded",
    "partitioner.class": "the sink partitions like the Java client (murmur2); use option"
    " kafka.partitioner for librdkafka's partitioners",
}
_JAAS = re.compile(
    r"^\s*org\.apache\.kafka\.common\.security\.(?P<module>plain\.PlainLoginModule|"
    r"scram\.ScramLoginModule)\s+required\s+(?P<args>.*?);?\s*$",
    re.DOTALL,
)
_JAAS_ARG = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def translate(client: Mapping[str, str]) -> dict[str, str]:
    """The librdkafka settings for these Java client settings (keys without `kafka.`)."""
    out: dict[str, str] = {}
    rest = dict(client)
    for java, why in NO_EQUIVALENT.items():
        if java in rest:
            raise OptionError(f"option 'kafka.{java}' has no librdkafka equivalent: {why}")
    for java, native in RENAMED.items():
        if java in rest:
            out[native] = rest.pop(java)
    if rest.get("ssl.endpoint.identification.algorithm", "x").strip() == "":
        # the Java client's way to turn host name verification off; librdkafka's is "none"
        # and it refuses an empty value
        rest["ssl.endpoint.identification.algorithm"] = "none"
    if "sasl.jaas.config" in rest:
        out.update(_jaas(rest.pop("sasl.jaas.config")))
    out.update(_store("truststore", rest, "ssl.ca.location"))
    out.update(_store("keystore", rest, None))
    if "buffer.memory" in rest:
        raw = rest.pop("buffer.memory")
        if not raw.isdigit():
            raise OptionError(f"option 'kafka.buffer.memory' must be a byte count, got {raw!r}")
        out["queue.buffering.max.kbytes"] = str(max(1, int(raw) // 1024))
    out.update(rest)
    return out


def _jaas(config: str) -> dict[str, str]:
    match = _JAAS.match(config)
    if match is None:
        raise OptionError(
            "option 'kafka.sasl.jaas.config': only PlainLoginModule and ScramLoginModule have"
            " a librdkafka equivalent (sasl.username / sasl.password)"
        )
    args = {k: v.replace('\\"', '"') for k, v in _JAAS_ARG.findall(match["args"])}
    if set(args) != {"username", "password"}:
        raise OptionError(
            "option 'kafka.sasl.jaas.config' must give exactly username and password,"
            f" got {sorted(args)}"
        )
    return {"sasl.username": args["username"], "sasl.password": args["password"]}


def _store(kind: str, rest: dict[str, str], pem_location: str | None) -> dict[str, str]:
    """ssl.truststore.* / ssl.keystore.*: librdkafka reads PEM trust stores
    (ssl.ca.location) and PKCS#12 or PEM key stores, never JKS."""
    location = rest.pop(f"ssl.{kind}.location", None)
    store_type = rest.pop(f"ssl.{kind}.type", "JKS" if location else None)
    password = rest.pop(f"ssl.{kind}.password", None)
    if location is None:
        return {}
    store_type = (store_type or "JKS").upper()
    if kind == "truststore":
        if store_type != "PEM":
            raise OptionError(
                f"option 'kafka.ssl.truststore.type' {store_type}: librdkafka reads PEM trust"
                " stores only (convert it, set kafka.ssl.truststore.type=PEM)"
            )
        assert pem_location is not None
        return {pem_location: location}
    if store_type == "PKCS12":
        out = {"ssl.keystore.location": location}
        if password is not None:
            out["ssl.keystore.password"] = password
        return out
    if store_type == "PEM":
        out = {"ssl.certificate.location": location, "ssl.key.location": location}
        key_password = rest.pop("ssl.key.password", None)
        if key_password is not None:
            out["ssl.key.password"] = key_password
        return out
    raise OptionError(
        f"option 'kafka.ssl.keystore.type' {store_type}: librdkafka reads PKCS12 or PEM key"
        " stores only"
    )
