"""What a handler gets besides its request: the header, the broker and a response builder."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from proxy.build import Builder
from proxy.principal import ANONYMOUS, KafkaPrincipal
from wire.codec import RequestHeader, response_class

if TYPE_CHECKING:
    from proxy.broker import Broker


@dataclass
class RequestContext:
    header: RequestHeader
    broker: Broker
    peer: str = ""  # "host:port" of the client, for DescribeGroups' client_host
    listener: str = ""  # the listener the request came in on ("": the first)
    principal: KafkaPrincipal = ANONYMOUS  # the connection's (proxy/principal.py), for ACLs

    @property
    def advertised(self) -> tuple[str, int]:
        """This broker's address as advertised on the request's listener."""
        return self.broker.advertised_address(self.listener)

    @property
    def client_host(self) -> str:
        """Kafka's form of the client address: "/" + the IP."""
        host = self.peer.rpartition(":")[0] if ":" in self.peer else self.peer
        return "/" + host if host else ""

    @property
    def version(self) -> int:
        return self.header.api_version

    @cached_property
    def b(self) -> Builder:
        """Builder over the kio module of this request's response version."""
        import sys

        cls = response_class(self.header.api_key, self.header.api_version)
        return Builder(sys.modules[cls.__module__])
