"""What AlterConfigs and IncrementalAlterConfigs share: the per-resource refusals that come
before any config is looked at, in Kafka's order (a duplicate resource, a BROKER resource — kafkad's
broker configs are static —, another resource type, an unknown topic)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

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
) -> tuple[Answer, ...]:
    """Every resource's answer (``answer(resource, code, message)``: each API's own response
    entity), in request order: its refusal if it is refused before its configs are read
    (``refuse_resource``; ``authorize(type, name)`` is the authorization error of a resource,
    or None), else what ``alter(resource)`` answers."""
    seen = resource_counts(resources)
    responses = []
    for res in resources:
        refused = refuse_resource(broker, res, seen, authorize)
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
) -> tuple[ErrorCode, str] | None:
    """The error for ``res`` if it is refused before its configs are read, else None: the
    broker's checks (Kafka's ``ConfigAdminManager.preprocess``), then authorization (the
    controller's ``authorizeAlterResource``), then the resource itself."""
    if seen[(res.resource_type, res.resource_name)] > 1:
        return ErrorCode.invalid_request, f"Error due to duplicate resource {res.resource_name}"
    if res.resource_type == BROKER:
        names = ", ".join(c.name for c in res.configs)
        return ErrorCode.invalid_request, f"Cannot update these configs dynamically: {names}"
    if authorize is not None and (denied := authorize(res.resource_type, res.resource_name)):
        return denied, MESSAGES[denied]
    if res.resource_type != TOPIC:
        return ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}"
    if broker.topics.get(res.resource_name) is None:
        return ErrorCode.unknown_topic_or_partition, f"Topic {res.resource_name} does not exist"
    return None
