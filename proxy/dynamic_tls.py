"""A TLS listener's keystore and truststore changed at runtime (Kafka's dynamic
``listener.name.<l>.ssl.keystore.location`` & co., per broker: ``DynamicListenerConfig`` and
``SslFactory.validateReconfiguration``/``reconfigure``).

``ListenerTls`` holds each SSL/SASL_SSL listener's current ``TlsSettings``; a new connection
takes the settings current when it is accepted, a connection already open keeps the context
it shook hands with. A change of the broker's dynamic configs is checked before it is stored
(``validate``, one of ``DynamicBrokerConfigs.validators``) and applied after
(``reconfigure``, one of its ``listeners``). A listener is rebuilt when one of its keystore or
truststore configs changes. Deviation: Kafka also rebuilds when the same location is set again
and the file changed on disk (``DefaultSslEngineFactory.shouldBeRebuilt``); kafkad does not see
which configs a request named, so a file replaced in place needs a new location.

Checks, Kafka's (``SslFactory.createNewSslEngineFactory``), each refused INVALID_REQUEST with
"Validation of dynamic config update of SSLFactory failed: ...": the new settings must load
(kafkad's TLS config rules, proxy/tls.py); a listener keeps a keystore; a listener without a
truststore cannot get one; the new certificate's subject must equal the old one's unless
``ssl.allow.dn.changes``, and its subject alternative names must include the old ones unless
``ssl.allow.san.changes`` (``CertificateEntries.ensureCompatible``; a PEM keystore is one entry,
alias ``kafka``). Kafka's handshake check between old and new stores
(``SslEngineValidator``) is for the inter-broker listener, which a single node does not have.

The other configs of an existing listener (``listener.name.<l>.sasl.jaas.config``,
``...sasl.enabled.mechanisms``, ``...ssl.client.auth``...) cannot change at runtime in Kafka
either (``existing_listener_refusal``, Kafka's message): they serve a listener added at runtime
(proxy/dynamic_listeners.py); a TLS listener added at runtime joins ``ListenerTls`` (``add``),
its keystore/truststore then reconfigurable and checked like a startup listener's.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from typing import Any

from cryptography import x509

from proxy.broker_config_types import listener_prefixed
from proxy.dynamic_broker import SECURITY, DynamicBrokerConfigs
from proxy.dynamic_listeners import invalid_dynamic
from proxy.listeners import Listener, listener_value
from proxy.tls import TLS_PROTOCOLS, TlsConfigError, TlsSettings, server_settings

log = logging.getLogger("kafkad.tls")

_FAILED = "Validation of dynamic config update of SSLFactory failed: "
_CONFIG_EXCEPTION = "org.apache.kafka.common.config.ConfigException: "
_SAN_TYPES: dict[type, int] = {
    x509.RFC822Name: 1,
    x509.DNSName: 2,
    x509.DirectoryName: 4,
    x509.UniformResourceIdentifier: 6,
    x509.IPAddress: 7,
    x509.RegisteredID: 8,
}
_Snapshot = tuple[Any, ...]


class _Refused(Exception):
    pass


def _snapshot(values: Mapping[str, Any], listener: str) -> _Snapshot:
    """What a listener's TLS context is built from: its keystore/truststore configs."""
    return tuple(listener_value(values, listener, n) for n in sorted(SECURITY))


def _leaf(values: Mapping[str, Any], listener: str) -> x509.Certificate | None:
    """The keystore's certificate (the first of its chain), or None without a keystore."""
    location = listener_value(values, listener, "ssl.keystore.location")
    try:
        if location:
            with open(location, "rb") as f:
                data = f.read()
        else:
            data = listener_value(values, listener, "ssl.keystore.certificate.chain").encode()
            if not data:
                return None
        return x509.load_pem_x509_certificates(data)[0]
    except (OSError, ValueError) as exc:
        raise _Refused(f"cannot read the keystore's certificate: {exc}") from None


def _has_truststore(values: Mapping[str, Any], listener: str) -> bool:
    return bool(
        listener_value(values, listener, "ssl.truststore.location")
        or listener_value(values, listener, "ssl.truststore.certificates")
    )


def _dn(cert: x509.Certificate) -> str:
    """Java's X500Principal.toString()."""
    return ", ".join(rdn.rfc4514_string() for rdn in reversed(cert.subject.rdns))


def _sans(cert: x509.Certificate) -> set[tuple[int, str]]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    return {(_SAN_TYPES.get(type(n), 0), _java_san(n.value)) for n in ext.value}


def _java_san(value: Any) -> str:
    """Java's string of a name: an IPv6 address in full, no leading zeros (0:0:0:0:0:0:0:1)."""
    if isinstance(value, ipaddress.IPv6Address):
        return ":".join(f"{int(g, 16):x}" for g in value.exploded.split(":"))
    return str(value)


def _java_sans(sans: set[tuple[int, str]]) -> str:
    return "[" + ", ".join(f"[{t}, {v}]" for t, v in sorted(sans)) + "]"


def _compatible(
    old: x509.Certificate, new: x509.Certificate, allow_dn: bool, allow_san: bool
) -> None:
    if not allow_dn and _dn(old).lower() != _dn(new).lower():
        raise _Refused(
            "Keystore DistinguishedName does not match:  existing={alias=kafka, "
            f"DN={_dn(old)}}}, new={{alias=kafka, DN={_dn(new)}}}"
        )
    if not allow_san and not _sans(new) >= _sans(old):
        raise _Refused(
            "Keystore SubjectAltNames do not match:  existing={alias=kafka, "
            f"SAN={_java_sans(_sans(old))}}}, new={{alias=kafka, SAN={_java_sans(_sans(new))}}}"
        )


def existing_listener_refusal(
    dynamic: DynamicBrokerConfigs, listeners: frozenset[str], layer: Mapping[str, str]
) -> str | None:
    """Kafka's ``DynamicListenerConfig.validateReconfiguration``: a listener-prefixed config of
    an existing listener (``listeners``: their names, lower-cased) may change only if it is a
    keystore/truststore one or a connection limit (``_RECONFIGURABLE``)."""
    old = dynamic.layer(dynamic.node)
    for name in sorted(set(old) | set(layer)):
        parts = listener_prefixed(name)
        if parts is None or parts[0] not in listeners or parts[1] in _RECONFIGURABLE:
            continue
        if old.get(name) != layer.get(name):
            return invalid_dynamic(  # thrown inside Kafka's processReconfiguration
                "Configs cannot be updated dynamically for existing listener "
                f"ListenerName({parts[0].upper()}), restart broker or create a new listener "
                "for update"
            )
    return None


# Kafka's per-listener reconfigurable configs, which DynamicListenerConfig lets change: the
# keystore/truststore ones, SocketServer's and DataPlaneAcceptor's ListenerReconfigurableConfigs
# (the connection quotas are applied, proxy/connection_quotas.py; num.network.threads is stored
# and ignored, as its unprefixed name)
_RECONFIGURABLE = SECURITY | {
    "max.connections",
    "max.connection.creation.rate",
    "num.network.threads",
}


class ListenerTls:
    """The TLS settings of every SSL/SASL_SSL listener, kept current with the dynamic configs."""

    def __init__(
        self,
        dynamic: DynamicBrokerConfigs,
        endpoints: tuple[Listener, ...],
        values: Mapping[str, Any] | None = None,
    ) -> None:
        """``values``: the broker's, with the listener-prefixed configs of listeners added at
        runtime (DynamicListeners.values_with); default ``dynamic.values``."""
        self._dynamic = dynamic
        self._protocols = {e.name: e.protocol for e in endpoints if e.protocol in TLS_PROTOCOLS}
        self.settings: dict[str, TlsSettings] = {}
        self._built: dict[str, tuple[_Snapshot, x509.Certificate | None, bool]] = {}
        values = dynamic.values if values is None else values
        for name, protocol in self._protocols.items():
            try:
                self._build(values, name, protocol)
            except (TlsConfigError, _Refused) as exc:  # a stored keystore gone: the static one
                log.error("listener %s: dynamic keystore/truststore ignored: %s", name, exc)
                self._build(dynamic.with_security({}), name, protocol)
        dynamic.validators.append(self.validate)
        dynamic.listeners.append(self.reconfigure)

    def add(self, listener: Listener, values: Mapping[str, Any]) -> None:
        """A TLS listener added at runtime (proxy/dynamic_listeners.py), built from ``values``
        (DynamicListeners.values_with): from now on its keystore/truststore are reconfigurable
        and checked like the others'. Raises TlsConfigError."""
        self._build(values, listener.name, listener.protocol)
        self._protocols[listener.name] = listener.protocol

    def remove(self, name: str) -> None:
        """A listener removed at runtime."""
        self._protocols.pop(name, None)
        self._built.pop(name, None)
        self.settings.pop(name, None)

    def _build(self, values: Mapping[str, Any], name: str, protocol: str) -> None:
        settings = server_settings(values, name, protocol, warn=name not in self.settings)
        self._built[name] = (
            _snapshot(values, name),
            _leaf(values, name),
            _has_truststore(values, name),
        )
        self.settings[name] = settings

    def _check(self, values: Mapping[str, Any], name: str) -> None:
        """Kafka's checks of a listener's new keystore and truststore against its current."""
        _, old_leaf, old_trust = self._built[name]
        keystore = listener_value(values, name, "ssl.keystore.location") or listener_value(
            values, name, "ssl.keystore.key"
        )
        if old_leaf is not None and not keystore:
            raise _Refused(
                "Cannot remove the SSL keystore from an existing listener for which a keystore "
                "was configured."
            )
        try:
            server_settings(values, name, self._protocols[name], warn=False)
        except TlsConfigError as exc:
            raise _Refused(str(exc)) from None
        new_leaf = _leaf(values, name)
        if old_leaf is not None and new_leaf is not None:
            allow_dn = listener_value(values, name, "ssl.allow.dn.changes")
            allow_san = listener_value(values, name, "ssl.allow.san.changes")
            _compatible(old_leaf, new_leaf, allow_dn, allow_san)
        if not old_trust and _has_truststore(values, name):
            raise _Refused(
                "Cannot add SSL truststore to an existing listener for which no truststore was "
                "configured."
            )

    def _changed(self, values: Mapping[str, Any]) -> list[str]:
        return [n for n in self._protocols if _snapshot(values, n) != self._built[n][0]]

    def validate(self, layer: Mapping[str, str]) -> str | None:
        """The refusal of this node's new dynamic set ``layer``, or None."""
        try:
            values = self._dynamic.with_security(layer)
        except ValueError as exc:
            return f"{_FAILED}{_CONFIG_EXCEPTION}{exc}"
        current = self._dynamic.values
        for name in self._changed(values):
            if _snapshot(values, name) == _snapshot(current, name):
                continue  # as Kafka: checked only when its configs change (a stored one that
                # no longer loads, ignored at startup, blocks no other change)
            try:
                self._check(values, name)
            except _Refused as exc:
                return f"{_FAILED}{_CONFIG_EXCEPTION}{exc}"
        return None

    def reconfigure(self) -> None:
        """After a change: new connections to a changed listener use its new settings."""
        values = self._dynamic.values
        for name in self._changed(values):
            try:
                self._check(values, name)  # again: a file may have changed since validate
                self._build(values, name, self._protocols[name])
            except (_Refused, TlsConfigError) as exc:
                log.error("listener %s: new keystore/truststore not applied: %s", name, exc)
                continue
            log.info("listener %s: new TLS keystore/truststore for new connections", name)
