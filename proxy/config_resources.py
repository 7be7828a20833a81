"""What AlterConfigs and IncrementalAlterConfigs share: the per-resource refusals that come
before a topic's configs are looked at, in Kafka's order (a duplicate resource, a BROKER
resource's own checks — ``ConfigAdminManager.preprocess`` —, authorization, another resource
type, an unknown topic)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from proxy.acl.checks import MESSAGES
from proxy.broker import Broker

TOPIC, BROKER = 2, 4


class _NamedConfig(Protocol):
    @property
    def name(self) -> str: ...


class ConfigResource(Protocol):
    """A resource of an AlterConfigs or an IncrementalAlterConfigs request."""

    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def configs(self) -> Sequence[_NamedConfig]: ...


Resource = TypeVar("Resource", bound=ConfigResource)
Answer = TypeVar("Answer")


Authorize = Callable[[int, str], ErrorCode | None]


async def answer_each_resource(
    broker: Broker,
    resources: Sequence[Resource],
    alter: Callable[[Resource], Awaitable[tuple[ErrorCode, str | None]]],
    answer: Callable[[Resource, ErrorCode, str | None], Answer],
    authorize: Authorize | None = None,
    check_broker: Callable[[Resource], tuple[ErrorCode, str | None] | None] | None = None,
) -> tuple[Answer, ...]:
    """Every resource's answer (``answer(resource, code, message)``: each API's own response
    entity), in request order: its refusal if it is refused before its configs are read
    (``refuse_resource``; ``authorize(type, name)`` is the authorization error of a resource,
    or None; ``check_broker(resource)`` the refusal of a BROKER resource's change, or None),
    else what ``alter(resource)`` answers."""
    seen = resource_counts(resources)
    responses = []
    for res in resources:
        refused = refuse_resource(broker, res, seen, authorize, check_broker)
        code, message = refused if refused is not None else await alter(res)
        responses.append(answer(res, code, message))
    return tuple(responses)


def resource_counts(resources: Sequence[ConfigResource]) -> Counter[tuple[int, str]]:
    """How often each (type, name) appears in one request."""
    return Counter((r.resource_type, r.resource_name) for r in resources)


def refuse_resource(
    broker: Broker,
    res: ConfigResource,
    seen: Counter[tuple[int, str]],
    authorize: Authorize | None = None,
    check_broker: Callable[[Any], tuple[ErrorCode, str | None] | None] | None = None,
) -> tuple[ErrorCode, str | None] | None:
    """The error for ``res`` if it is refused before its configs are read, else None: the
    broker's checks (Kafka's ``ConfigAdminManager.preprocess``), then authorization (the
    controller's ``authorizeAlterResource``), then the resource itself."""
    if seen[(res.resource_type, res.resource_name)] > 1:
        return ErrorCode.invalid_request, f"Error due to duplicate resource {res.resource_name}"
    if res.resource_type == BROKER:
        if res.resource_name and (bad := broker_id_error(broker.node_id, res.resource_name)):
            return ErrorCode.invalid_request, bad
        if check_broker is None:
            names = ", ".join(c.name for c in res.configs)
            return ErrorCode.invalid_request, f"Cannot update these configs dynamically: {names}"
        if (refused := check_broker(res)) is not None:
            return refused
    if authorize is not None and (denied := authorize(res.resource_type, res.resource_name)):
        return denied, MESSAGES[denied]
    if res.resource_type == BROKER:
        return None
    if res.resource_type != TOPIC:
        return ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}"
    if broker.topics.get(res.resource_name) is None:
        return ErrorCode.unknown_topic_or_partition, f"Topic {res.resource_name} does not exist"
    return None


def broker_id_error(node_id: int, name: str) -> str | None:
    """Kafka's ``validateResourceNameIsCurrentNodeId`` for a non-empty BROKER resource name."""
    try:
        given = int(name)
    except ValueError:
        return f"Node id must be an integer, but it is: {name}"
    if given != node_id:
        return f"Unexpected broker id, expected {node_id}, but received {name}"
    return None
