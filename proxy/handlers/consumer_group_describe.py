"""ConsumerGroupDescribe (key 69), v0-1 (KIP-848). v1 (KIP-1099): each member's type (1: a
consumer-protocol member, 0: a member using the classic protocol, online migration).

Kafka's ConsumerGroup.asDescribedGroup: group epoch, target assignment epoch, state, the
preferred assignor, and per member its epoch, subscription, current and target assignment
(topic ids and names). A missing group, or a classic one, is GROUP_ID_NOT_FOUND with Kafka's
message; an empty group id INVALID_GROUP_ID (Kafka's GroupCoordinatorService, which sets the
id null there; kafkad echoes "", the field not being nullable). A group's authorized
operations are computed when asked for (Kafka's ``authorizedOperations`` of the GROUP
resource), else "not computed".

Authorization (KafkaApis.handleConsumerGroupDescribe): DESCRIBE on each group, else that group
is GROUP_AUTHORIZATION_FAILED (those come first); a group whose members' assignments name a
topic the client may not describe is TOPIC_AUTHORIZATION_FAILED with Kafka's message and no
members.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_describe.v1.response import (
    Assignment,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
    TopicPartitions,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32

from coordinator.consumer_group.model import Assignment as Partitions
from coordinator.consumer_group.model import ConsumerGroup
from proxy.acl.checks import authorized_operations
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.registry import handler
from wire.values import AUTHORIZED_OPERATIONS_OMITTED, NO_THROTTLE

CONSUMER_MEMBER = i8(1)
CLASSIC_MEMBER = i8(0)
TOPICS_UNAUTHORIZED = (
    "The group has described topic(s) that the client is not authorized to describe."
)


def _failed(group_id: GroupId, code: ErrorCode, message: str | None) -> DescribedGroup:
    return DescribedGroup(
        error_code=code,
        error_message=message or None,
        group_id=group_id,
        group_state="",
        group_epoch=i32(0),
        assignment_epoch=i32(0),
        assignor_name="",
        members=(),
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _error_reply(
    req: ConsumerGroupDescribeRequest, code: ErrorCode
) -> ConsumerGroupDescribeResponse:
    return ConsumerGroupDescribeResponse(
        throttle_time=NO_THROTTLE, groups=tuple(_failed(g, code, None) for g in req.group_ids)
    )


def _assignment(a: Partitions, names: Mapping[object, str]) -> Assignment:
    return Assignment(
        topic_partitions=tuple(
            TopicPartitions(
                topic_id=t,
                topic_name=TopicName(names.get(t, "")),
                partitions=tuple(i32(p) for p in sorted(ps)),
            )
            for t, ps in sorted(a.items(), key=lambda kv: names.get(kv[0], str(kv[0])))
            if t in names  # a deleted topic is left out, as Kafka's topicPartitionsFromMap
        )
    )


def _described(g: ConsumerGroup, assignor: str, names: Mapping[object, str]) -> DescribedGroup:
    return DescribedGroup(
        error_code=ErrorCode.none,
        group_id=GroupId(g.group_id),
        group_state=g.state.value,
        group_epoch=i32(g.group_epoch),
        assignment_epoch=i32(g.assignment_epoch),
        assignor_name=assignor,
        members=tuple(
            Member(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=i32(m.member_epoch),
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(TopicName(t) for t in m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_assignment(m.assigned, names),
                target_assignment=_assignment(g.target.get(m.member_id, {}), names),
                member_type=CLASSIC_MEMBER if m.classic is not None else CONSUMER_MEMBER,
            )
            for m in g.members.values()
        ),
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


@handler(
    api_key=69,
    versions=(0, 1),
    request=ConsumerGroupDescribeRequest,
    response=ConsumerGroupDescribeResponse,
    error_reply=_error_reply,
)
async def consumer_group_describe(
    ctx: RequestContext, req: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    groups = ctx.broker.groups
    if not groups.consumer_protocol_enabled:
        return _error_reply(req, ErrorCode.unsupported_version)
    names = {t.topic_id: t.name for t in ctx.broker.topics}
    out = []  # the groups the principal may not DESCRIBE come first, as in Kafka
    allowed: list[GroupId] = []
    for group_id in req.group_ids:
        if ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            allowed.append(group_id)
        else:
            out.append(_failed(group_id, ErrorCode.group_authorization_failed, None))
    for group_id in allowed:
        if not group_id:
            out.append(_failed(group_id, ErrorCode.invalid_group_id, None))
            continue
        found = groups.describe_consumer_group(group_id)
        if isinstance(found, tuple):
            out.append(_failed(group_id, *found))
            continue
        topics = {
            names[t]
            for m in found.members.values()
            for a in (m.assigned, found.target.get(m.member_id, {}))
            for t in a
            if t in names
        }
        if not all(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, t) for t in topics):
            out.append(_failed(group_id, ErrorCode.topic_authorization_failed, TOPICS_UNAUTHORIZED))
            continue
        described = _described(found, groups.preferred_assignor(found), names)
        if req.include_authorized_operations:
            ops = authorized_operations(ctx, ResourceType.GROUP, group_id)
            described = dataclasses.replace(described, authorized_operations=ops)
        out.append(described)
    return ConsumerGroupDescribeResponse(throttle_time=NO_THROTTLE, groups=tuple(out))
