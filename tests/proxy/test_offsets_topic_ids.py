"""OffsetCommit v10 and OffsetFetch v10 (Kafka 4.1+): topics by id, UNKNOWN_TOPIC_ID for ids
the broker does not know, and the same authorization as v9; offsets committed by id are read
back by name and the other way round."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v10 import request as oc10
from kio.schema.offset_fetch.v9 import request as of9
from kio.schema.offset_fetch.v10 import request as of10

from proxy.acl.model import AclOperation as Op
from proxy.acl.model import ResourceType as Res
from tests.proxy.harness import RawClient, connect, running_broker
from tests.proxy.test_broker_requests import create
from tests.proxy.test_consumer_group_requests import _Deny, commit_request, join

E = ErrorCode
NOWHERE = uuid.UUID(int=7)


def commit10(group: str, member: str, epoch: int, *ids: uuid.UUID) -> oc10.OffsetCommitRequest:
    return oc10.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member,
        topics=tuple(
            oc10.OffsetCommitRequestTopic(
                topic_id=i,
                partitions=(
                    oc10.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=11, committed_metadata="m"
                    ),
                ),
            )
            for i in ids
        ),
    )


async def fetch10(
    c: RawClient, group: str, ids: tuple[uuid.UUID, ...] | None, **kw: object
) -> list[tuple[uuid.UUID | None, int, int, ErrorCode]] | ErrorCode:
    topics = (
        None
        if ids is None
        else tuple(of10.OffsetFetchRequestTopics(topic_id=i, partition_indexes=(0,)) for i in ids)
    )
    r = await c.request(
        of10.OffsetFetchRequest(
            groups=(of10.OffsetFetchRequestGroup(group_id=group, topics=topics, **kw),),  # type: ignore[arg-type]
        )
    )
    [g] = r.groups
    if g.error_code is not E.none:
        return g.error_code
    return [
        (t.topic_id, p.partition_index, p.committed_offset, p.error_code)
        for t in g.topics
        for p in t.partitions
    ]


async def test_commit_and_fetch_by_topic_id() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "t", 1) is E.none
        assert server.broker is not None
        tid = server.broker.topics.get("t").topic_id  # type: ignore[union-attr]
        r = await c.request(commit10("s", "", -1, tid, NOWHERE, uuid.UUID(int=0)))
        assert [
            (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in r.topics
        ] == [
            (tid, [(0, E.none)]),
            (NOWHERE, [(0, E.unknown_topic_id)]),
            (None, [(0, E.unknown_topic_id)]),  # kio reads the zero id as None
        ]
        assert await fetch10(c, "s", (tid, NOWHERE)) == [
            (tid, 0, 11, E.none),
            (NOWHERE, 0, -1, E.unknown_topic_id),
        ]
        assert await fetch10(c, "s", None) == [(tid, 0, 11, E.none)]
        # committed by id, read back by name (v9)
        r9 = await c.request(
            of9.OffsetFetchRequest(
                groups=(
                    of9.OffsetFetchRequestGroup(
                        group_id="s",
                        topics=(of9.OffsetFetchRequestTopics(name="t", partition_indexes=(0,)),),
                    ),
                ),
                require_stable=False,
            )
        )
        assert r9.groups[0].topics[0].partitions[0].committed_offset == 11


async def test_member_epochs_by_topic_id() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "t", 1) is E.none
        assert server.broker is not None
        tid = server.broker.topics.get("t").topic_id  # type: ignore[union-attr]
        assert (await c.request(join("g", "m1"))).member_epoch == 1
        r = await c.request(commit10("g", "m1", 2, tid))
        assert r.topics[0].partitions[0].error_code is E.stale_member_epoch
        r = await c.request(commit10("g", "m1", 1, tid))
        assert r.topics[0].partitions[0].error_code is E.none
        assert await fetch10(c, "g", (tid,), member_id="m1", member_epoch=0) == (
            E.stale_member_epoch
        )
        assert await fetch10(c, "g", (tid,), member_id="m1", member_epoch=1) == [
            (tid, 0, 11, E.none)
        ]


async def test_authorization_by_topic_id() -> None:
    async with running_broker() as (server, port), connect(port) as c:
        assert await create(c, "t", 1) is E.none
        assert await create(c, "secret", 1) is E.none
        assert server.broker is not None
        tid = server.broker.topics.get("t").topic_id  # type: ignore[union-attr]
        sid = server.broker.topics.get("secret").topic_id  # type: ignore[union-attr]
        assert (await c.request(commit_request("s", "", -1))).topics[0].partitions[
            0
        ].error_code is E.none
        server.broker.authorizer = _Deny(
            (Op.READ, Res.GROUP, "g"),
            (Op.DESCRIBE, Res.GROUP, "g"),
            (Op.READ, Res.TOPIC, "secret"),
            (Op.DESCRIBE, Res.TOPIC, "secret"),
        )
        r = await c.request(commit10("g", "", -1, tid, NOWHERE))
        assert [(t.topic_id, t.partitions[0].error_code) for t in r.topics] == [
            (tid, E.group_authorization_failed),
            (NOWHERE, E.group_authorization_failed),
        ]
        # an unknown id is UNKNOWN_TOPIC_ID before (without) the topic check
        r = await c.request(commit10("s", "", -1, sid, NOWHERE, tid))
        assert [(t.topic_id, t.partitions[0].error_code) for t in r.topics] == [
            (sid, E.topic_authorization_failed),
            (NOWHERE, E.unknown_topic_id),
            (tid, E.none),
        ]
        assert await fetch10(c, "g", (tid,)) == E.group_authorization_failed
        assert await fetch10(c, "s", (sid, tid)) == [
            (tid, 0, 11, E.none),
            (sid, 0, -1, E.topic_authorization_failed),
        ]
        assert await fetch10(c, "s", None) == [(tid, 0, 11, E.none)]
