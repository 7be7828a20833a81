"""What a handler gets besides its request: the header, the broker and a response builder."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from proxy.build import Builder
from wire.codec import RequestHeader, response_class

if TYPE_CHECKING:
    from proxy.broker import Broker


@dataclass
class RequestContext:
    header: RequestHeader
    broker: Broker

    @property
    def version(self) -> int:
        return self.header.api_version

    @cached_property
    def b(self) -> Builder:
        """Builder over the kio module of this request's response version."""
        import sys

        cls = response_class(self.header.api_key, self.header.api_version)
        return Builder(sys.modules[cls.__module__])
