"""What a handler gets besides its request: the header (and so the version the client spoke),
the broker, the client's address and the listener the request came in on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from proxy.acl.authorizer import authorize_by_resource_type
from proxy.acl.model import AclOperation, ResourceType
from proxy.principal import ANONYMOUS, KafkaPrincipal
from wire.codec import RequestHeader

if TYPE_CHECKING:
    from proxy.broker import Broker
    from proxy.sasl.session import SaslSession


@dataclass
class RequestContext:
    header: RequestHeader
    broker: Broker
    peer: str = ""  # "host:port" of the client, for DescribeGroups' client_host
    listener: str = ""  # the listener the request came in on ("": the first)
    principal: KafkaPrincipal = ANONYMOUS  # the connection's (proxy/principal.py), for ACLs
    session: SaslSession | None = None  # the connection's SASL state on a SASL listener
    # the request time a Fetch already charged to the request quota (proxy/quotas/enforce.py)
    request_time_charged: float | None = None

    @property
    def advertised(self) -> tuple[str, int]:
        """This broker's address as advertised on the request's listener."""
        return self.broker.advertised_address(self.listener)

    @property
    def client_host(self) -> str:
        """Kafka's form of the client address: "/" + the IP."""
        host = self._host
        return "/" + host if host else ""

    def authorized(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether this connection's principal may do ``operation`` on the resource (True when
        no authorizer is configured: ``authorizer.class.name`` unset, Kafka's default)."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(self.principal, self._host, operation, resource_type, name)

    def authorized_by_resource_type(
        self, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether this connection's principal may do ``operation`` on at least one resource of
        ``resource_type`` (Kafka's ``authorizeByResourceType``: e.g. an idempotent producer
        without CLUSTER IDEMPOTENT_WRITE needs WRITE on some topic); True with no authorizer."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return authorize_by_resource_type(
            authorizer,
            self.broker.acls.bindings,
            self.principal,
            self._host,
            operation,
            resource_type,
        )

    @property
    def _host(self) -> str:
        """The client's IP (the peer address without its port), as ACLs match hosts."""
        return self.peer.rpartition(":")[0] if ":" in self.peer else self.peer

    @property
    def version(self) -> int:
        """The version the client spoke (the handler sees the newest version's classes)."""
        return self.header.api_version
