"""The transaction coordinator's APIs over the wire (raw kio requests against an in-process
broker): FindCoordinator(TRANSACTION), transactional InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions, every advertised version,
including the per-version rewrite of PRODUCER_FENCED (spec eos.md §1.4).

Produce still refuses transactional batches on this branch and the broker's marker writer is a
refusing stand-in, so these transactions carry no data; the runtime tests cover the markers.
"""

from __future__ import annotations

import datetime
import importlib
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from coordinator.placement import partition_for
from proxy.registry import advertised
from proxy.server import Server
from tests.proxy.harness import RawClient, connect, encode_request, running_broker

E = ErrorCode
MS = datetime.timedelta(milliseconds=1)


def req(api: str, version: int, cls: str, **kw: Any) -> Any:
    mod = importlib.import_module(f"kio.schema.{api}.v{version}.request")
    return getattr(mod, cls)(**kw)


async def init(
    c: RawClient, tid: str, version: int = 4, timeout_ms: int = 60_000, **kw: Any
) -> Any:
    if version >= 3:
        kw.setdefault("producer_id", -1)
        kw.setdefault("producer_epoch", -1)
    return await c.request(
        req(
            "init_producer_id",
            version,
            "InitProducerIdRequest",
            transactional_id=tid,
            transaction_timeout=timeout_ms * MS,
            **kw,
        )
    )


async def add_partitions(
    c: RawClient, version: int, tid: str, pid: int, epoch: int, topics: dict[str, list[int]]
) -> dict[tuple[str, int], ErrorCode]:
    mod = importlib.import_module(f"kio.schema.add_partitions_to_txn.v{version}.request")
    r = await c.request(
        mod.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=tuple(
                mod.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                for t, ps in topics.items()
            ),
        )
    )
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


async def add_offsets(
    c: RawClient, version: int, tid: str, pid: int, epoch: int, group: str = "g"
) -> ErrorCode:
    r = await c.request(
        req(
            "add_offsets_to_txn",
            version,
            "AddOffsetsToTxnRequest",
            transactional_id=tid,
            producer_id=pid,
            producer_epoch=epoch,
            group_id=group,
        )
    )
    return ErrorCode(r.error_code)


async def end_txn(
    c: RawClient, version: int, tid: str, pid: int, epoch: int, commit: bool
) -> ErrorCode:
    r = await c.request(
        req(
            "end_txn",
            version,
            "EndTxnRequest",
            transactional_id=tid,
            producer_id=pid,
            producer_epoch=epoch,
            committed=commit,
        )
    )
    return ErrorCode(r.error_code)


async def describe(c: RawClient, *tids: str) -> list[Any]:
    r = await c.request(
        req("describe_transactions", 0, "DescribeTransactionsRequest", transactional_ids=tids)
    )
    return list(r.transaction_states)


async def raw_start_time(c: RawClient, tid: str) -> int:
    """TransactionStartTimeMs of one id, read from the frame: kio's reader refuses the -1
    Kafka sends for "no transaction"."""
    request = req(
        "describe_transactions", 0, "DescribeTransactionsRequest", transactional_ids=(tid,)
    )
    await c.stream.send_all(encode_request(request, 999))
    frame = await c.read_frame()
    assert frame is not None
    state = frame[4 + 1 + 4 + 1 + 2 + 1 + len(tid) :]  # header, throttle, count, error, id
    pos = 1 + state[0] - 1 + 4  # the compact state name, then the timeout
    return int.from_bytes(state[pos : pos + 8], "big", signed=True)


async def with_topic(server: Server) -> None:
    assert server.broker is not None
    await server.broker.topics.create("t", 2, {})


def test_advertised_versions() -> None:
    versions = advertised()
    assert versions[10] == (0, 6)
    assert versions[22] == (0, 5)
    assert versions[24] == (0, 5)
    assert versions[25] == (0, 4)
    assert versions[26] == (0, 5)
    assert versions[65] == (0, 0)
    assert versions[66] == (0, 2)


@pytest.mark.parametrize("version", range(1, 7))
async def test_find_coordinator_transaction(version: int) -> None:
    with trio.fail_after(10):
        async with running_broker() as (_, port), connect(port) as c:
            kw: dict[str, Any] = {"key_type": 1}
            if version >= 4:
                kw["coordinator_keys"] = ("tx-a", "tx-b")
            else:
                kw["key"] = "tx-a"
            r = await c.request(req("find_coordinator", version, "FindCoordinatorRequest", **kw))
            found = r.coordinators if version >= 4 else [r]
            assert len(found) == (2 if version >= 4 else 1)
            for f in found:
                assert (f.error_code, f.node_id, f.port) == (E.none, 1, port)


@pytest.mark.parametrize("version", [4, 6])
async def test_find_coordinator_share_key_type_is_refused(version: int) -> None:
    """Key type SHARE (2): INVALID_REQUEST, below v6 and (no share coordinator) at v6."""
    with trio.fail_after(10):
        async with running_broker() as (_, port), connect(port) as c:
            r = await c.request(
                req(
                    "find_coordinator",
                    version,
                    "FindCoordinatorRequest",
                    key_type=2,
                    coordinator_keys=("s",),
                )
            )
            [found] = r.coordinators
            assert (found.error_code, found.node_id) == (E.invalid_request, -1)


@pytest.mark.parametrize("version", range(5))
async def test_commit_and_abort_every_version(version: int) -> None:
    add_v, init_v = min(version, 3), version
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            await with_topic(server)
            r = await init(c, "tx", init_v)
            assert (r.error_code, r.producer_epoch) == (E.none, 0)
            pid = r.producer_id
            codes = await add_partitions(c, add_v, "tx", pid, 0, {"t": [0, 1]})
            assert codes == {("t", 0): E.none, ("t", 1): E.none}
            assert await add_offsets(c, version, "tx", pid, 0, "group-1") is E.none
            (state,) = await describe(c, "tx")
            assert state.transaction_state == "Ongoing"
            offsets_partition = partition_for("group-1", 50)
            assert {(t.topic, p) for t in state.topics for p in t.partitions} == {
                ("t", 0),
                ("t", 1),
                ("__consumer_offsets", offsets_partition),
            }
            assert await end_txn(c, version, "tx", pid, 0, True) is E.none
            (state,) = await describe(c, "tx")
            assert (state.transaction_state, state.topics) == ("CompleteCommit", ())
            assert await end_txn(c, version, "tx", pid, 0, True) is E.none  # retry
            assert await add_partitions(c, add_v, "tx", pid, 0, {"t": [1]}) == {("t", 1): E.none}
            assert await end_txn(c, version, "tx", pid, 0, False) is E.none
            assert (await describe(c, "tx"))[0].transaction_state == "CompleteAbort"
            assert await end_txn(c, version, "tx", pid, 0, True) is E.invalid_txn_state


@pytest.mark.parametrize("version", range(5))
async def test_fenced_producer_error_per_version(version: int) -> None:
    fenced = E.invalid_producer_epoch if version < 2 else E.producer_fenced
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            await with_topic(server)
            first = await init(c, "tx")
            second = await init(c, "tx")  # a new instance bumps the epoch
            pid = first.producer_id
            assert (second.producer_id, second.producer_epoch) == (pid, 1)
            assert await end_txn(c, version, "tx", pid, 0, True) is fenced
            assert await add_offsets(c, version, "tx", pid, 0) is fenced
            if version <= 3:
                codes = await add_partitions(c, version, "tx", pid, 0, {"t": [0]})
                assert codes == {("t", 0): fenced}
            other = await end_txn(c, version, "tx", pid + 100, 1, True)
            assert other is E.invalid_producer_id_mapping


@pytest.mark.parametrize("version", range(3, 6))
async def test_init_producer_id_fenced_per_version(version: int) -> None:
    fenced = E.invalid_producer_epoch if version < 4 else E.producer_fenced
    with trio.fail_after(10):
        async with running_broker() as (_, port), connect(port) as c:
            first = await init(c, "tx", version)
            await init(c, "tx", version)
            stale = await init(c, "tx", version, producer_id=first.producer_id, producer_epoch=0)
            assert stale.error_code is fenced
            # KIP-360: the current (id, epoch) bumps
            bump = await init(c, "tx", version, producer_id=first.producer_id, producer_epoch=1)
            assert (bump.error_code, bump.producer_epoch) == (E.none, 2)


async def test_second_instance_fences_an_ongoing_transaction() -> None:
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            await with_topic(server)
            first = await init(c, "tx")
            pid = first.producer_id
            await add_partitions(c, 3, "tx", pid, 0, {"t": [0]})
            r = await init(c, "tx")
            assert r.error_code is E.concurrent_transactions  # the zombie's txn is aborted
            (state,) = await describe(c, "tx")
            assert (state.transaction_state, state.producer_epoch) == ("CompleteAbort", 1)
            r = await init(c, "tx")
            assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, pid, 2)
            assert await end_txn(c, 1, "tx", pid, 0, True) is E.invalid_producer_epoch
            assert await end_txn(c, 4, "tx", pid, 0, True) is E.producer_fenced


async def test_request_errors() -> None:
    limited = running_broker(**{"transaction.max.timeout.ms": "1000"})
    with trio.fail_after(10):
        async with limited as (server, port), connect(port) as c:
            await with_topic(server)
            assert (await init(c, "tx", timeout_ms=1001)).error_code is (
                E.invalid_transaction_timeout
            )
            assert (await init(c, "", 0)).error_code is E.invalid_request
            r = await init(c, "tx", timeout_ms=1000)
            pid = r.producer_id
            # EndTxn with nothing added: INVALID_TXN_STATE (clients avoid sending it)
            assert await end_txn(c, 3, "tx", pid, 0, True) is E.invalid_txn_state
            assert await end_txn(c, 3, "unknown", pid, 0, True) is E.invalid_producer_id_mapping
            codes = await add_partitions(c, 3, "tx", pid, 0, {"t": [0, 7], "nope": [0]})
            assert codes == {
                ("t", 0): E.operation_not_attempted,
                ("t", 7): E.unknown_topic_or_partition,
                ("nope", 0): E.unknown_topic_or_partition,
            }
            assert await raw_start_time(c, "tx") == -1  # Empty: no transaction


async def test_describe_and_list_transactions() -> None:
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            await with_topic(server)
            a = await init(c, "a")
            await add_partitions(c, 3, "a", a.producer_id, 0, {"t": [1]})
            b = await init(c, "b")
            states = await describe(c, "a", "missing", "")
            assert [s.error_code for s in states] == [
                E.none,
                E.transactional_id_not_found,
                E.invalid_request,
            ]
            sa = states[0]
            assert (states[1].transaction_state, states[1].producer_id) == ("", 0)
            assert (sa.transaction_state, sa.producer_id, sa.producer_epoch) == (
                "Ongoing",
                a.producer_id,
                0,
            )
            assert [(t.topic, t.partitions) for t in sa.topics] == [("t", (1,))]
            assert sa.transaction_timeout == 60_000 * MS
            assert sa.transaction_start_time.timestamp() > 0
            assert await raw_start_time(c, "b") == -1

            for version in (0, 1):
                r = await c.request(req("list_transactions", version, "ListTransactionsRequest"))
                assert r.error_code is E.none
                assert sorted(t.transactional_id for t in r.transaction_states) == ["a", "b"]
                r = await c.request(
                    req(
                        "list_transactions",
                        version,
                        "ListTransactionsRequest",
                        state_filters=("Ongoing", "Nonsense"),
                    )
                )
                assert r.unknown_state_filters == ("Nonsense",)
                assert [
                    (t.transactional_id, t.transaction_state) for t in r.transaction_states
                ] == [("a", "Ongoing")]
                r = await c.request(
                    req(
                        "list_transactions",
                        version,
                        "ListTransactionsRequest",
                        producer_id_filters=(b.producer_id,),
                    )
                )
                assert [t.transactional_id for t in r.transaction_states] == ["b"]
            r = await c.request(
                req(
                    "list_transactions",
                    1,
                    "ListTransactionsRequest",
                    state_filters=("Ongoing",),
                    duration_filter=3_600_000,
                )
            )
            assert r.transaction_states == ()


async def test_list_transactions_v2_filters_on_a_whole_id_pattern() -> None:
    # KIP-1152: the pattern must match the whole id (Matcher.matches); null or "" is no filter
    with trio.fail_after(10):
        async with running_broker() as (_, port), connect(port) as c:
            for tid in ("app-1", "app-2", "other-app", "app"):
                await init(c, tid)

            async def listed(pattern: str | None, **kw: Any) -> list[str]:
                r = await c.request(
                    req(
                        "list_transactions",
                        2,
                        "ListTransactionsRequest",
                        transactional_id_pattern=pattern,
                        **kw,
                    )
                )
                assert r.error_code is E.none
                return sorted(t.transactional_id for t in r.transaction_states)

            every = ["app", "app-1", "app-2", "other-app"]
            assert await listed(None) == await listed("") == every
            assert await listed("app") == ["app"]  # not a search: other-app is left out
            assert await listed("app-.*") == ["app-1", "app-2"]
            assert await listed(".*app") == ["app", "other-app"]
            assert await listed("app-[2-9]", state_filters=("Empty",)) == ["app-2"]
            assert await listed("app-.*", state_filters=("Ongoing",)) == []
            # RE2/J has no nesting limit: parentheses 2000 deep match the empty id alone
            assert await listed("(" * 2000 + ")" * 2000) == []
            # what RE2/J (Kafka's dialect) cannot compile
            for bad in ("app-(", "a{4294967296}", r"(a)\1", "a{1001}"):
                r = await c.request(
                    req(
                        "list_transactions",
                        2,
                        "ListTransactionsRequest",
                        state_filters=("Nonsense",),
                        transactional_id_pattern=bad,
                    )
                )
                assert (r.error_code, r.unknown_state_filters, r.transaction_states) == (
                    E.invalid_regular_expression,
                    (),
                    (),
                )


async def test_list_transactions_v2_pattern_cannot_backtrack_for_ages() -> None:
    """``(a+)+b`` over 100 ids of 40 to 139 ``a``: a backtracking matcher (Python's ``re``)
    tries 2**40 ways and more per id before saying no, stalling the broker's event loop; RE2
    (Kafka's RE2/J is linear too) answers at once. The assertion is the answer itself: the
    handler matches synchronously, so a regression does not come back (pytest's timeout then
    fails it); fail_after is only a guard."""
    ids = ["a" * n for n in range(40, 140)] + ["a" * 40 + "b"]
    with trio.fail_after(60):
        async with running_broker() as (_, port), connect(port) as c:
            for tid in ids:
                await init(c, tid)
            r = await c.request(
                req(
                    "list_transactions",
                    2,
                    "ListTransactionsRequest",
                    transactional_id_pattern="(a+)+b",
                )
            )
            assert r.error_code is E.none
            assert [t.transactional_id for t in r.transaction_states] == ["a" * 40 + "b"]
            r = await c.request(req("list_transactions", 2, "ListTransactionsRequest"))
            assert len(r.transaction_states) == len(ids)


async def test_list_transactions_while_loading_answers_only_the_load() -> None:
    # Kafka's TransactionStateManager.listTransactionStates: COORDINATOR_LOAD_IN_PROGRESS comes
    # first, alone (no unknown state filters), before the pattern is even compiled
    with trio.fail_after(10):
        async with running_broker() as (server, port), connect(port) as c:
            assert server.broker is not None
            await init(c, "app")
            server.broker.txns.loaded = trio.Event()  # as while the coordinator loads
            for pattern in (None, "app", "app-("):
                r = await c.request(
                    req(
                        "list_transactions",
                        2,
                        "ListTransactionsRequest",
                        state_filters=("Nonsense",),
                        transactional_id_pattern=pattern,
                    )
                )
                assert (r.error_code, r.unknown_state_filters, r.transaction_states) == (
                    E.coordinator_load_in_progress,
                    (),
                    (),
                ), pattern


async def test_state_survives_a_restart(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    with trio.fail_after(20):
        async with running_broker(url) as (server, port), connect(port) as c:
            await with_topic(server)
            a = await init(c, "a")
            await add_partitions(c, 3, "a", a.producer_id, 0, {"t": [0]})
            assert await end_txn(c, 3, "a", a.producer_id, 0, True) is E.none
        async with running_broker(url) as (_, port), connect(port) as c:
            (state,) = await describe(c, "a")
            assert (state.transaction_state, state.producer_id) == ("CompleteCommit", a.producer_id)
            r = await init(c, "a")
            assert (r.producer_id, r.producer_epoch) == (a.producer_id, 1)
