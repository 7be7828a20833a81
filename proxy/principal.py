"""Who a connection is: Kafka's ``KafkaPrincipal`` (``User:NAME``).

Every connection starts as ``User:ANONYMOUS`` (Kafka's principal for PLAINTEXT and for TLS
without a client certificate). An SSL listener with a client certificate sets it from the
certificate's distinguished name, mapped by ``ssl.principal.mapping.rules``
(``proxy/ssl_principal.py``); a SASL layer replaces it after authentication. The authorizer
reads it from ``RequestContext.principal``.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:  # Kafka's form, as ACLs name principals: "User:alice"
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
