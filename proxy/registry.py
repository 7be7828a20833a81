"""The handler registry: one entry per API key, with the version range it serves.

``proxy.handlers.MODULES`` lists every API with its versions; ApiVersions is answered from
it, and a handler module is imported on its API's first request (``entry``), which keeps
start-up short. The ``@handler`` decorator refuses a handler whose versions differ from its
row, so what kafkad advertises cannot drift from what it implements. This module imports no
handler module statically: handlers import it.

A handler is typed with kio's classes of the newest version it serves: it takes that version's
request and returns that version's response, whatever version the client spoke
(``wire.versions.convert`` moves requests up and responses down). Next to it, each handler may
register:

- ``error_reply(request, code)``: its answer when it fails (Kafka's
  ``AbstractRequest.getErrorResponse``): the request's items echoed back carrying the error, so
  a client can tell which items failed. Without one, every error code in the response is set
  and every list left empty;
- ``upgrade(old_request, version)``: fields of the newest request for fields only older
  versions have (e.g. LeaveGroup v0-2's one ``member_id``), and ``downgrade(response,
  old_request, version)`` the other way, for fields only older versions' responses have (those
  the client's version lacks are left out). Both run for every version below the newest, so
  each checks the version it is given;
- ``encode(response, correlation_id, version)``: the whole response frame written straight
  from the newest version's answer, for an API whose generic path (``write`` then kio's
  writer) is measurably slow on the hot path (Produce: ``wire/produce_response.py``). It must
  give the generic path's bytes;
- ``as_sent=True``: the handler takes the request as the client sent it (the class of the
  version it spoke; ``error_reply`` too) and answers in that version's classes, with no
  conversion either way: for a hot path whose conversions measurably cost (Fetch: about
  0.1 ms per request each way at 4 partitions, a third of the handler) or whose newest
  version lost a field older ones are keyed by (Fetch v13 replaced topic names by ids).
  ``write`` then passes the answer through (``convert`` returns an object of the target class
  as it is).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kio.schema.errors import ErrorCode

from proxy.handlers import MODULES, load
from proxy.outcomes import NoResponse
from wire.codec import request_class, response_class
from wire.versions import convert, error_response

if TYPE_CHECKING:
    from proxy.context import RequestContext

Req = TypeVar("Req")
Resp = TypeVar("Resp")
HandlerFn = Callable[["RequestContext", Req], Awaitable[Resp | NoResponse]]
Upgrade = Callable[[Any, int], Mapping[str, Any]]
Downgrade = Callable[[Resp, Any, int], Mapping[str, Any]]
Encode = Callable[[Resp, int, int], bytes]


@dataclass(frozen=True, slots=True)
class Handler(Generic[Req, Resp]):
    api_key: int
    min_version: int
    max_version: int
    fn: HandlerFn[Req, Resp]
    request: type[Req]
    response: type[Resp]
    error_reply: Callable[[Req, ErrorCode], Resp]
    upgrade: Upgrade | None = None
    downgrade: Downgrade[Resp] | None = None
    encode: Encode[Resp] | None = None
    # Versions below this are advertised but refused (Produce: advertised from 0, served from 3,
    # see spec §1.1 / KAFKA-18659).
    min_served: int | None = None
    as_sent: bool = False  # the handler takes and answers the client's version's classes

    def read(self, body: Any) -> Req:
        """The request as the handler takes it (the newest version's class, or the client's
        version's with ``as_sent``)."""
        if type(body) is self.request or self.as_sent:
            return body  # type: ignore[no-any-return]
        extra = {} if self.upgrade is None else self.upgrade(body, int(body.__version__))
        return convert(body, self.request, **extra)

    def write(self, response: Resp, body: Any, version: int) -> Any:
        """``response`` (newest version) in the class of the version the client spoke;
        ``body`` is the request as decoded."""
        if version == self.max_version:
            return response
        extra = self.downgrade(response, body, version) if self.downgrade is not None else {}
        return convert(response, response_class(self.api_key, version), **extra)


REGISTRY: dict[int, Handler[Any, Any]] = {}


def handler(
    api_key: int,
    versions: tuple[int, int],
    *,
    request: type[Req],
    response: type[Resp],
    error_reply: Callable[[Req, ErrorCode], Resp] | None = None,
    upgrade: Upgrade | None = None,
    downgrade: Downgrade[Resp] | None = None,
    min_served: int | None = None,
    encode: Encode[Resp] | None = None,
    as_sent: bool = False,
) -> Callable[[HandlerFn[Req, Resp]], HandlerFn[Req, Resp]]:
    low, high = versions
    if request is not request_class(api_key, high) or response is not response_class(api_key, high):
        raise TypeError(f"api {api_key}: a handler takes and returns v{high}'s classes")
    row = MODULES.get(api_key)
    if row is None or row[2:] != (versions, min_served):
        raise TypeError(f"api {api_key}: {versions}, {min_served} differ from proxy.handlers")

    def register(fn: HandlerFn[Req, Resp]) -> HandlerFn[Req, Resp]:
        if api_key in REGISTRY:
            raise RuntimeError(f"api key {api_key} registered twice")
        reply = error_reply or (lambda _req, code: error_response(response, code))
        REGISTRY[api_key] = Handler(
            api_key,
            low,
            high,
            fn,
            request,
            response,
            reply,
            upgrade,
            downgrade,
            encode,
            min_served,
            as_sent,
        )
        return fn

    return register


def entry(api_key: int) -> Handler[Any, Any]:
    """The handler of ``api_key`` (a served one), its module imported on first use."""
    found = REGISTRY.get(api_key)
    if found is None:
        load(api_key)
        found = REGISTRY[api_key]
    return found


def advertised() -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) as ApiVersions reports them."""
    return {k: versions for k, (_, _, versions, _) in sorted(MODULES.items())}


def served() -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) that requests are decoded for."""
    return {
        k: (low if min_served is None else min_served, high)
        for k, (_, _, (low, high), min_served) in sorted(MODULES.items())
    }


def api_names() -> dict[int, str]:
    """api_key -> the handler function's name (Kafka's API name in snake case)."""
    return {k: name for k, (_, name, _, _) in MODULES.items()}
