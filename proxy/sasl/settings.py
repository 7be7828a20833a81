"""A SASL listener's settings from Kafka's broker configs.

``sasl.enabled.mechanisms`` (per listener as ``listener.name.<l>.sasl.enabled.mechanisms``),
the PLAIN users from ``listener.name.<l>.plain.sasl.jaas.config`` as Kafka writes it::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice";

(``user_NAME="password"`` options are the users; ``username``/``password`` are the broker's
own client identity, unused on one node), ``connections.max.reauth.ms`` (KIP-368),
``connection.failed.authentication.delay.ms`` and ``sasl.server.max.receive.size`` (the largest
frame before and during authentication, 512 KiB).

OAUTHBEARER validates unsecured tokens (proxy/sasl/oauthbearer.py) with the
``unsecuredValidator*`` options of ``listener.name.<l>.oauthbearer.sasl.jaas.config``, or, with
``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`` set to Kafka's
``OAuthBearerValidatorCallbackHandler``, signed JWTs against the keys of a JWKS file and the
``sasl.oauthbearer.*`` settings (proxy/sasl/oauthbearer_jwt.py). No other callback handler
class can be loaded: naming one fails at start-up.

Deviations: Kafka's default ``sasl.enabled.mechanisms`` is GSSAPI (Kerberos), which kafkad
does not serve: a SASL listener whose mechanisms name it fails at start-up with a message
saying what to set. The JAAS config is read from the broker config
only (no ``java.security.auth.login.config`` file). SCRAM needs no JAAS entry here (Kafka's
``ScramLoginModule`` line is accepted and ignored).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy.listeners import LISTENER_PREFIX, listener_value
from proxy.sasl.mechanisms import OAUTHBEARER, PLAIN, SERVED_MECHANISMS
from proxy.sasl.oauthbearer_jwt import (
    OAUTH_CONFIGS,
    REMOVED_CLASS,
    UNSECURED_CLASS,
    VALIDATOR_CLASS,
    JwtValidator,
    jwt_validator,
)

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTHBEARER_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


class SaslConfigError(ValueError):
    pass


def _mechanisms(v: str) -> str:
    names = [m.strip() for m in v.split(",") if m.strip()]
    if not names:
        raise ValueError("no mechanism enabled")
    return ",".join(names)


def _jaas(v: str) -> str:
    if v:
        parse_jaas(v)
    return v


def _long(v: str) -> int:
    n = int(v)
    if n < 0:
        raise ValueError("must be >= 0")
    return n


def _callback_handler(v: str) -> str:
    """OAUTHBEARER's server callback handler: Kafka's two validators, nothing else."""
    if v in ("", VALIDATOR_CLASS, UNSECURED_CLASS):
        return v
    if v == REMOVED_CLASS:
        raise ValueError(f"that class was removed in Kafka 4.0; use {VALIDATOR_CLASS}")
    raise ValueError(
        f"kafkad cannot load a custom callback handler; it serves {VALIDATOR_CLASS} (signed "
        f"JWTs) and {UNSECURED_CLASS} (the default, unsecured tokens)"
    )


OAUTH_HANDLER = "oauthbearer.sasl.server.callback.handler.class"


# name -> (parser, default); each may be overridden per listener (listener.name.<l>.NAME)
SASL_CONFIGS: dict[str, tuple[Callable[[str], Any], str]] = {
    "sasl.enabled.mechanisms": (_mechanisms, "GSSAPI"),
    "plain.sasl.jaas.config": (_jaas, ""),
    "scram-sha-256.sasl.jaas.config": (_jaas, ""),
    "scram-sha-512.sasl.jaas.config": (_jaas, ""),
    "oauthbearer.sasl.jaas.config": (_jaas, ""),
    OAUTH_HANDLER: (_callback_handler, ""),
    # KIP-768's validator settings (proxy/sasl/oauthbearer_jwt.py)
    **OAUTH_CONFIGS,
    "connections.max.reauth.ms": (_long, "0"),
    "connection.failed.authentication.delay.ms": (_long, "100"),
    # the largest frame before and during authentication (Kafka's BrokerSecurityConfigs)
    "sasl.server.max.receive.size": (_long, "524288"),
}
SENSITIVE = frozenset(n for n in SASL_CONFIGS if n.endswith("jaas.config"))
# names read per listener and mechanism too: listener.name.<l>.oauthbearer.sasl.oauthbearer.*
# and listener.name.<l>.<mechanism>.connections.max.reauth.ms (Kafka's SaslChannelBuilder
# createConnectionsMaxReauthMsMap: the mechanism's own value first, else the listener's)
SASL_MECHANISM_CONFIGS: dict[str, Callable[[str], Any]] = {
    **{f"oauthbearer.{n}": p for n, (p, _) in OAUTH_CONFIGS.items()},
    **{f"{m.lower()}.connections.max.reauth.ms": _long for m in SERVED_MECHANISMS},
}

_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """(login module class, options) of one JAAS entry ``Module flag k="v" ...;``."""
    body = text.strip()
    if not body.endswith(";"):
        raise ValueError("a JAAS entry ends with ';'")
    head = body[:-1].split(None, 2)
    if len(head) < 2 or head[1] not in ("required", "requisite", "sufficient", "optional"):
        raise ValueError("expected 'LoginModuleClass required|requisite|sufficient|optional ...'")
    rest = head[2] if len(head) == 3 else ""
    options: dict[str, str] = {}
    pos = 0
    while pos < len(rest):
        if rest[pos:].strip() == "":
            break
        m = _OPTION.match(rest, pos)
        if m is None:
            # the position only: the text may hold a password
            raise ValueError(f"cannot read the options at character {len(head[0]) + pos + 1}")
        value = m.group(2) if m.group(2) is not None else m.group(3)
        options[m.group(1)] = re.sub(r"\\(.)", r"\1", value)
        pos = m.end()
    return head[0], options


@dataclass(frozen=True)
class SaslSettings:
    listener: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(repr=False, default_factory=dict)
    reauth_ms: int = 0  # connections.max.reauth.ms of the listener
    failed_delay_ms: int = 100
    oauth_options: Mapping[str, str] = field(default_factory=dict)  # unsecuredValidator*
    oauth_validator: JwtValidator | None = None  # signed JWTs; None: unsecured tokens
    max_receive_size: int = 524288  # sasl.server.max.receive.size
    # listener.name.<l>.<mechanism>.connections.max.reauth.ms, overriding reauth_ms
    reauth_ms_by_mechanism: Mapping[str, int] = field(default_factory=dict)

    def max_reauth_ms(self, mechanism: str | None) -> int:
        """connections.max.reauth.ms for a session authenticated with ``mechanism``."""
        return self.reauth_ms_by_mechanism.get(mechanism or "", self.reauth_ms)


def listener_sasl(values: Mapping[str, Any], listener: str) -> SaslSettings:
    """The settings of SASL listener ``listener``; SaslConfigError names what to change."""

    def get(name: str) -> Any:
        return listener_value(values, listener, name)

    mechanisms = tuple(get("sasl.enabled.mechanisms").split(","))
    unserved = [m for m in mechanisms if m not in SERVED_MECHANISMS]
    if unserved:
        raise SaslConfigError(
            f"listener {listener}: sasl.enabled.mechanisms names {', '.join(unserved)}, which "
            f"kafkad does not serve (it serves {', '.join(SERVED_MECHANISMS)}); set "
            f"listener.name.{listener.lower()}.sasl.enabled.mechanisms (Kafka's default is GSSAPI)"
        )
    users: dict[str, str] = {}
    if PLAIN in mechanisms:
        jaas = get("plain.sasl.jaas.config")
        if not jaas:
            raise SaslConfigError(
                f"listener {listener}: PLAIN needs its users: set "
                f"listener.name.{listener.lower()}.plain.sasl.jaas.config to "
                f'"{PLAIN_MODULE} required user_NAME=\\"PASSWORD\\";"'
            )
        module, options = parse_jaas(jaas)
        if module != PLAIN_MODULE:
            raise SaslConfigError(f"listener {listener}: PLAIN's login module is {PLAIN_MODULE}")
        users = {k[len("user_") :]: v for k, v in options.items() if k.startswith("user_")}
    oauth: dict[str, str] = {}
    if OAUTHBEARER in mechanisms and get("oauthbearer.sasl.jaas.config"):
        module, oauth = parse_jaas(get("oauthbearer.sasl.jaas.config"))
        if module != OAUTHBEARER_MODULE:
            raise SaslConfigError(
                f"listener {listener}: OAUTHBEARER's login module is {OAUTHBEARER_MODULE}"
            )
    validator = None
    if OAUTHBEARER in mechanisms and get(OAUTH_HANDLER) == VALIDATOR_CLASS:

        def oauth_get(name: str) -> Any:  # Kafka's ConfigurationUtils.get: oauthbearer.NAME first
            prefixed = f"{LISTENER_PREFIX}{listener.lower()}.oauthbearer.{name}"
            return values[prefixed] if prefixed in values else get(name)

        try:
            validator = jwt_validator(oauth_get)
        except ValueError as exc:
            raise SaslConfigError(f"listener {listener}: OAUTHBEARER: {exc}") from None
    by_mechanism = {}
    for mechanism in mechanisms:
        name = f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.connections.max.reauth.ms"
        if name in values:
            by_mechanism[mechanism] = values[name]
    return SaslSettings(
        listener,
        mechanisms,
        users,
        get("connections.max.reauth.ms"),
        get("connection.failed.authentication.delay.ms"),
        oauth,
        validator,
        get("sasl.server.max.receive.size"),
        by_mechanism,
    )
