"""Broker addresses in upstream responses, found and replaced (pure, no I/O).

Every response that hands a client a broker address is decoded with kio, its endpoints
(a struct with ``host`` and ``port``) replaced by the proxy's own, and re-encoded; every other
response passes as bytes. Every response schema of Kafka 4.2
(clients/src/main/resources/common/message/*Response.json, tag 4.2.0-rc1) with a host or port
field, and what the proxy does with it:

==========================  =====  =====================================================
Produce (0)                 v10+   ``node_endpoints`` (KIP-951: the new leader): rewritten
Fetch (1)                   v16+   ``node_endpoints`` (KIP-951): rewritten
Metadata (3)                all    ``brokers``: rewritten; the complete broker set
FindCoordinator (10)        all    ``host``/``port`` (v0-3), ``coordinators`` (v4+): rewritten
DescribeQuorum (55)         v2+    ``nodes[].listeners``: rewritten; the complete voter set
DescribeCluster (60)        all    ``brokers``: rewritten; the complete broker set
ShareFetch (78)             v1+    ``node_endpoints`` (KIP-932): rewritten
ShareAcknowledge (79)       v1+    ``node_endpoints`` (KIP-932): rewritten
DescribeAcls (29)           -      ``host`` is an ACL's client host pattern, not a broker
DeleteAcls (31)             -      ``host`` is an ACL's client host pattern, not a broker
StreamsGroupDescribe (89)   -      the application's own endpoints (KIP-1071), not brokers
StreamsGroupHeartbeat (88)  -      the application's own endpoints (KIP-1071), not brokers
Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54), FetchSnapshot (59),
UpdateRaftVoter (82)        -      controller-to-controller traffic, not client traffic
==========================  =====  =====================================================

(``ClientHost`` in DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe and
StreamsGroupDescribe is a group member's address, not a broker's: it passes unchanged.)

Each one kafkad serves is tested through a running proxy (tests/proxy/forward/
test_forward.py): Metadata, FindCoordinator, DescribeCluster and DescribeQuorum from a real
kafkad, Produce and Fetch naming a new leader from a scripted upstream. ShareFetch and
ShareAcknowledge, which kafkad does not serve, are rewritten by the same walk, untested.

An endpoint the proxy has not seen yet gets a listener on the fly, before the response goes
out (``ForwardProxy.local_addresses``): a new leader named only by a Produce or Fetch's
``node_endpoints`` is reachable through the proxy at once. Fetch responses are big and carry
records, and Produce responses are many, so one is decoded only when its top-level tagged
fields hold ``node_endpoints`` (``proxy/forward/hints.py`` finds them by walking the wire
format, records skipped by length). kio keeps record batches as bytes, so a rewritten Fetch
carries them unchanged.

The node id of each endpoint comes from the nearest enclosing ``node_id``/``broker_id``
(Metadata's brokers, DescribeCluster's, DescribeQuorum's nodes, KIP-951's endpoints). An
endpoint with port < 0 or an empty host (FindCoordinator with an error) is left alone.
Metadata and DescribeCluster list every broker of the listener asked (DescribeQuorum every
voter): ``complete_set`` names them, and the proxy releases the listeners of brokers that
have left (``proxy/forward/server.py``).

ApiVersions is rewritten too: the highest version the proxy advertises for each API above is
capped at the highest kio knows, since a version the proxy cannot decode would let addresses
through unrewritten.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.index import load_response_schema

from proxy.forward.frames import kio_range, read_body, response_body_start, write_body
from proxy.forward.hints import names_leaders
from wire.errors import DecodeError
from wire.headers import API_VERSIONS_KEY, response_header, skip_tagged_fields

PRODUCE_KEY = 0
FETCH_KEY = 1
# api key -> first version whose response carries broker endpoints
ENDPOINT_APIS: Mapping[int, int] = {0: 10, 1: 16, 3: 0, 10: 0, 55: 2, 60: 0, 78: 1, 79: 1}
NODE_FIELDS = ("node_id", "broker_id")
COMPLETE_SETS: Mapping[int, str] = {3: "brokers", 60: "brokers", 55: "controllers"}


@dataclass(frozen=True, slots=True)
class Endpoint:
    node_id: int | None
    host: str
    port: int


def carries_endpoints(api_key: int, version: int) -> bool:
    first = ENDPOINT_APIS.get(api_key)
    return first is not None and version >= first


def might_carry_endpoints(api_key: int, version: int, frame: bytes) -> bool:
    """Cheap test before decoding: Produce and Fetch only if their top-level tagged fields
    hold ``node_endpoints`` (a frame that does not parse is decoded, to report why). For
    the versions ``carries_endpoints`` accepts."""
    if api_key not in (PRODUCE_KEY, FETCH_KEY):
        return True
    try:  # Produce v10+ and Fetch v16+ are flexible: a v1 header (tagged fields after the id)
        start = 5 if frame[4:5] == b"\x00" else skip_tagged_fields(frame, 4, len(frame))
        return names_leaders(api_key, version, frame, start)
    except DecodeError:
        return True


def complete_set(api_key: int) -> str | None:
    """What a (non-empty) endpoint list of this API's response is the whole of: "brokers"
    (Metadata, DescribeCluster), "controllers" (DescribeQuorum), or None."""
    return COMPLETE_SETS.get(api_key)


@dataclass(slots=True)
class Decoded:
    """A response decoded for rewriting: its body and the endpoints found in it."""

    api_key: int
    version: int
    correlation_id: int
    body: Any
    endpoints: list[Endpoint]


def decode(api_key: int, version: int, frame: bytes) -> Decoded:
    """Decode a response frame (no size prefix) of an endpoint-carrying API; DecodeError if
    it does not parse."""
    try:
        cls = load_response_schema(api_key, version)
    except Exception as exc:  # a version kio does not know (ApiVersions is capped to avoid it)
        raise DecodeError(f"api {api_key} v{version}: no schema to find its endpoints") from exc
    pos = response_body_start(api_key, version, frame)
    body = read_body(cls, frame, pos)
    found: list[Endpoint] = []

    def note(node: int | None, e: Any) -> Any:
        found.append(Endpoint(node, e.host, int(e.port)))
        return e

    _walk(body, None, note)
    return Decoded(api_key, version, int.from_bytes(frame[:4], "big", signed=True), body, found)


EndpointKey = tuple[int | None, str, int]  # node id, host, port


def rewrite(decoded: Decoded, local: Mapping[EndpointKey, tuple[str, int]]) -> bytes:
    """The response frame (size prefix included) with every endpoint in ``local`` (by node id,
    host and port: two node ids at one address get one listener each) replaced."""

    def replace(node: int | None, e: Any) -> Any:
        new = local.get((node, e.host, int(e.port)))
        if new is None:
            return e
        return dataclasses.replace(e, host=new[0], port=type(e.port)(new[1]))

    body = _walk(decoded.body, None, replace)
    cls = type(body)
    flexible = bool(cls.__flexible__) and decoded.api_key != API_VERSIONS_KEY
    out = response_header(decoded.correlation_id, flexible) + write_body(cls, body)
    return len(out).to_bytes(4, "big") + out


def _walk(entity: Any, node: int | None, fn: Callable[[int | None, Any], Any]) -> Any:
    """``entity`` with ``fn(node_id, endpoint)`` applied to every endpoint inside it."""
    names = field_names(type(entity))
    for name in NODE_FIELDS:
        if name in names:
            node = int(getattr(entity, name))
    if "host" in names and "port" in names and entity.host and int(entity.port) >= 0:
        entity = fn(node, entity)
    changes: dict[str, Any] = {}
    for name in nested_fields(type(entity)):
        value = getattr(entity, name)
        if value is None:
            continue
        if isinstance(value, tuple):
            new_items = tuple(_walk(item, node, fn) for item in value)
            if any(a is not b for a, b in zip(new_items, value, strict=True)):
                changes[name] = new_items
        else:
            new = _walk(value, node, fn)
            if new is not value:
                changes[name] = new
    return dataclasses.replace(entity, **changes) if changes else entity


_FIELD_NAMES: dict[Any, frozenset[str]] = {}
_NESTED: dict[Any, tuple[str, ...]] = {}


def field_names(cls: Any) -> frozenset[str]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


def nested_fields(cls: Any) -> tuple[str, ...]:
    """Fields of ``cls`` holding structs (alone or in a list)."""
    found = _NESTED.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            args = [a for a in typing.get_args(tp) if a is not type(None)] or [tp]
            if any(dataclasses.is_dataclass(a) for a in args):
                out.append(f.name)
        found = _NESTED[cls] = tuple(out)
    return found


# -- ApiVersions ----------------------------------------------------------------------------


def cap_api_versions(version: int, frame: bytes) -> bytes | None:
    """The ApiVersions response with each endpoint API's highest version capped at kio's;
    None when nothing needs capping (or the response is not decodable: it passes as is)."""
    try:
        cls = load_response_schema(API_VERSIONS_KEY, version)
        body = read_body(cls, frame, 4)
    except Exception:
        return None
    entries = []
    changed = False
    for item in body.api_keys:
        key = int(item.api_key)
        known = kio_range(key) if key in ENDPOINT_APIS else None
        if known is not None and int(item.max_version) > known[1]:
            item = dataclasses.replace(item, max_version=type(item.max_version)(known[1]))
            changed = True
        entries.append(item)
    if not changed:
        return None
    body = dataclasses.replace(body, api_keys=tuple(entries))
    out = frame[:4] + write_body(cls, body)
    return len(out).to_bytes(4, "big") + out
