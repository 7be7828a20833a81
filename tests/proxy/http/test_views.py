"""The console's view models over a real in-process broker (memory store, real coordinators):
what each page shows, without HTTP."""

from __future__ import annotations

import struct

import pytest
from kio.schema.errors import ErrorCode

from proxy.broker import Broker
from proxy.http.views import clients, groups, partition, records, topics, transactions
from storage.api import TopicPartition
from storage.topics import Topic
from tests.proxy.http.conftest import NOW, Txn, plain, topic
from wire.records import Record, build_batch, read_batch_header

HANG_MS = 30_000


async def test_open_transaction_holds_the_lso_at_its_first_offset(broker: Broker) -> None:
    (p,) = await topic(broker, "t")
    await plain(p, b"a", b"b")
    t = await Txn(broker, "tx-open").init()
    first = await t.send(p, b"x")
    await plain(p, b"c")
    d = await partition.partition_detail(broker, "t", 0, NOW + 1_000, HANG_MS)
    assert d is not None
    assert (d.row.log_start, d.row.last_stable, d.row.high_watermark) == (0, first, 4)
    holder = d.lso_holder
    assert holder is not None
    assert (holder.producer_id, holder.first_offset, holder.since_ms) == (t.producer_id, 2, NOW)
    assert holder.transactional_id == "tx-open" and holder.hanging == ()
    assert [e.current_txn_start_offset for e in d.producers] == [first]
    # the transaction view lists it, with its partition, as Ongoing and not hanging
    (row,) = await transactions.txn_rows(broker, NOW + 1_000, HANG_MS)
    assert (row.state, row.partitions, row.hanging) == ("Ongoing", (TopicPartition("t", 0),), ())


async def test_commit_moves_the_lso_and_abort_fills_the_aborted_index(broker: Broker) -> None:
    (p,) = await topic(broker, "t")
    committed = await Txn(broker, "c").init()
    aborted = await Txn(broker, "a").init()
    await committed.send(p, b"c1")
    first_aborted = await aborted.send(p, b"a1", b"a2")
    assert p.last_stable_offset == 0
    await committed.end(commit=True)
    assert p.last_stable_offset == first_aborted
    await aborted.end(commit=False)
    d = await partition.partition_detail(broker, "t", 0, NOW, HANG_MS)
    assert d is not None and d.lso_holder is None
    assert d.row.last_stable == d.row.high_watermark == 5
    (entry,) = d.aborted
    assert (entry.producer_id, entry.first_offset) == (aborted.producer_id, first_aborted)
    history = await transactions.txn_history(broker, "a")
    assert [h.state for h in history] == [
        "Empty", "Ongoing", "PrepareAbort", "CompleteAbort"
    ]  # fmt: skip


async def test_record_browser_raw_and_read_committed(broker: Broker) -> None:
    (p,) = await topic(broker, "t")
    c, a, o = [await Txn(broker, tid).init() for tid in ("c", "a", "o")]
    await c.send(p, b"c1")  # 0
    await a.send(p, b"a1", b"a2")  # 1-2
    await c.end(commit=True)  # COMMIT at 3
    await a.end(commit=False)  # ABORT at 4
    await plain(p, b"plain")  # 5
    await o.send(p, b"open")  # 6: holds the LSO
    raw = await records.record_page(p, 0, committed=False)
    assert [(b.base_offset, b.marker, b.aborted) for b in raw.batches] == [
        (0, None, False),
        (1, None, True),
        (3, "COMMIT", False),
        (4, "ABORT", False),
        (5, None, False),
        (6, None, False),
    ]
    assert raw.batches[1].records[1].value == "a2" and raw.batches[1].transactional
    read = await records.record_page(p, 0, committed=True)
    assert [b.base_offset for b in read.batches] == [0, 5]  # no markers, no aborted data, < LSO
    assert read.last_stable == 6 and read.aborted_index == ((a.producer_id, 1),)
    later = await records.record_page(p, 2, committed=False, max_batches=2)
    assert [b.base_offset for b in later.batches] == [1, 3] and later.next_offset == 4


async def test_record_browser_refuses_offsets_outside_the_log(broker: Broker) -> None:
    (p,) = await topic(broker, "t")
    await plain(p, b"x")
    for bad in (-1, 2, 10**12):
        try:
            await records.record_page(p, bad, committed=False)
        except records.BadOffset:
            continue
        raise AssertionError(f"offset {bad} accepted")
    assert (await records.record_page(p, 1, committed=False)).batches == ()


async def test_hanging_transaction_is_flagged(broker: Broker) -> None:
    p0, p1 = await topic(broker, "t", 2)
    t = await Txn(broker, "slow").init(timeout_ms=600_000)
    await t.send(p0, b"x", ts=NOW)
    await t.send(p1, b"y", ts=NOW)
    # younger than the threshold: not hanging
    assert await transactions.hanging_on_partitions(broker, NOW + HANG_MS, HANG_MS) == []
    row = await transactions.find_txn(broker, "slow", NOW + HANG_MS, HANG_MS)
    assert row is not None and row.hanging == ()
    # older: flagged, on the transaction and on each partition it pins
    later = NOW + HANG_MS + 1
    stuck = await transactions.hanging_on_partitions(broker, later, HANG_MS)
    assert [(s.tp.partition, s.holds_lso) for s in stuck] == [(0, True), (1, True)]
    row = await transactions.find_txn(broker, "slow", later, HANG_MS)
    assert row is not None and len(row.hanging) == 2 and "pinning its LSO" in row.hanging[0]


async def test_past_its_timeout_is_hanging(broker: Broker) -> None:
    (p,) = await topic(broker, "t")
    t = await Txn(broker, "late").init(timeout_ms=1_000)
    await t.send(p, b"x", ts=broker.now_ms())
    meta = broker.txns.cache["late"]
    row = await transactions.find_txn(broker, "late", meta.txn_start_timestamp + 1_001, 10**9)
    assert row is not None and row.hanging == ("past its timeout of 1000 ms",)


async def test_abort_as_the_transactions_tool_does(broker: Broker) -> None:
    (p,) = await topic(broker, "t")
    t = await Txn(broker, "orphan").init()
    first = await t.send(p, b"x", b"y")
    assert await transactions.abort_open_transaction(broker, "t", 0, first + 1) is None
    code = await transactions.abort_open_transaction(broker, "t", 0, first)
    assert code is not None and code.value == 0
    assert p.last_stable_offset == p.high_watermark == 3
    assert [(a.producer_id, a.first_offset) for a in p.producers.aborted] == [(t.producer_id, 0)]
    page = await records.record_page(p, 0, committed=False)
    assert [(b.aborted, b.marker) for b in page.batches] == [(True, None), (False, "ABORT")]


async def test_topics_and_cleaner_columns(broker: Broker) -> None:
    await topic(broker, "plain", 2)
    (c,) = await topic(broker, "compacted", 1, **{"cleanup.policy": "compact"})
    await plain(c, b"v")
    rows = {r.name: r for r in topics.topic_rows(broker, NOW)}
    assert rows["plain"].cleanup_policy == "delete" and len(rows["plain"].partitions) == 2
    assert rows["plain"].partitions[0].dirty_ratio is None
    (cp,) = rows["compacted"].partitions
    assert rows["compacted"].cleanup_policy == "compact"
    assert cp.dirty_ratio == 0.0 and cp.last_pass is None  # only the active segment: nothing
    assert cp.high_watermark == 1 and cp.size_bytes == cp.segments[0].size > 0
    assert topics.topic_row(broker, "missing", NOW) is None


def assignment(parts: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 1, len(parts))
    for name, ps in parts.items():
        out += struct.pack(">h", len(name)) + name.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", x) for x in ps)
    return out + struct.pack(">i", -1)


def test_consumer_assignment_decoding() -> None:
    got = groups.consumer_assignment(assignment({"a": [0, 2], "b": [1]}))
    assert got == (TopicPartition("a", 0), TopicPartition("a", 2), TopicPartition("b", 1))
    assert groups.consumer_assignment(b"") == ()
    assert groups.consumer_assignment(b"\x00\x01\x00\x00\x00\x05") is None


async def test_group_lag_against_the_high_watermark_and_the_lso(broker: Broker) -> None:
    from coordinator.group.offsets import CommitRequest

    (p,) = await topic(broker, "t")
    await plain(p, b"a", b"b")
    o = await Txn(broker, "o").init()
    await o.send(p, b"open")  # LSO 2, HW 3
    await plain(p, b"c")  # HW 4
    got = await broker.groups.commit_offsets(
        "g", "", None, -1, [CommitRequest(TopicPartition("t", 0), 1, -1, None)]
    )
    assert got == {TopicPartition("t", 0): ErrorCode.none}
    (row,) = groups.group_rows(broker)
    (off,) = row.offsets
    assert (off.committed, off.high_watermark, off.last_stable) == (1, 4, 2)
    assert (off.lag, off.lag_committed) == (3, 1)
    assert groups.group_row(broker, "nope") is None


async def test_clients_without_and_with_telemetry(broker: Broker) -> None:
    from tests.proxy.test_client_telemetry import otlp

    telemetry = broker.client_telemetry
    assert telemetry.enabled  # on by default: no client has pushed yet
    assert clients.client_rows(broker) == []
    for client_id in ("old", "new"):
        sub = telemetry.get_subscription(None, client_id)
        payload = otlp(("m", 3.0), attrs={"b": "2", "a": "1"})
        code = telemetry.push(sub.instance_id, client_id, sub.subscription_id, False, 0, payload)
        assert code == 0
    rows = clients.client_rows(broker)
    assert rows is not None and {r.client_id for r in rows} == {"new", "old"}
    assert rows[0].last_push_ms >= rows[1].last_push_ms
    assert any(m.labels == "a=1,b=2" and m.value == 3.0 for m in rows[0].metrics)
    telemetry.enabled = False
    assert clients.client_rows(broker) is None


async def test_producers_by_partition_is_what_describe_producers_returns(broker: Broker) -> None:
    p0, p1, _ = await topic(broker, "t", 3)
    t = await Txn(broker, "x").init()
    await t.send(p0, b"a", b"b")
    await t.send(p1, b"c")
    got = partition.producers_by_partition(broker)
    assert [
        (tp.partition, [(r.producer_id, r.last_sequence) for r in rows]) for tp, rows in got
    ] == [
        (0, [(t.producer_id, 1)]),
        (1, [(t.producer_id, 2)]),
    ]
    assert got[0][1][0].current_txn_start_offset == 0


def test_hanging_reasons_follow_the_coordinator() -> None:
    from coordinator.txn.metadata import TxnMetadata
    from coordinator.txn.state import TxnState

    tp = TopicPartition("t", 0)
    meta = TxnMetadata("x", 7, 60_000, NOW, producer_epoch=0, txn_start_timestamp=NOW)
    assert partition.hanging_reasons(tp, 10, None, NOW, HANG_MS) == (
        "no transactional id has this producer id",
    )
    for state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        meta.state, meta.partitions = state, frozenset({("t", 0)})
        assert partition.hanging_reasons(tp, 10, meta, NOW, HANG_MS) == (), state
    meta.partitions = frozenset({("t", 1)})
    (why,) = partition.hanging_reasons(tp, 10, meta, NOW, HANG_MS)
    assert "not open here" in why
    meta.state, meta.partitions = TxnState.COMPLETE_ABORT, frozenset()
    assert "CompleteAbort" in partition.hanging_reasons(tp, 10, meta, NOW, HANG_MS)[0]
    meta.state, meta.partitions = TxnState.ONGOING, frozenset({("t", 0)})
    assert partition.hanging_reasons(tp, 10, meta, NOW + 60_001, HANG_MS) == (
        "past its timeout of 60000 ms",
    )
    assert partition.hanging_reasons(tp, HANG_MS + 1, meta, NOW, HANG_MS) == (
        f"open here for more than {HANG_MS} ms",
    )


async def test_dirty_ratio_and_the_cleaners_last_pass(broker: Broker) -> None:
    configs = {"cleanup.policy": "compact", "segment.bytes": "200"}
    t = await broker.topics.create("c", 1, configs, trusted_configs=True)  # tiny segments
    assert isinstance(t, Topic)
    (p,) = t.partitions
    for i in range(6):
        data = build_batch([Record(0, 0, b"same-key", b"value-%d" % i)], base_timestamp=NOW)
        assert isinstance(await p.append(data, read_batch_header(data), NOW), tuple)
    row = topics.partition_row(broker, p, NOW)
    assert row.dirty_ratio is not None and row.dirty_ratio > 0.5 and row.last_pass is None
    assert len(row.segments) > 1
    (result,) = await broker.cleaner.clean_once(broker.topics, NOW)
    cleaned = topics.partition_row(broker, p, NOW + 5)
    assert cleaned.last_pass is not None and cleaned.last_pass.at_ms == NOW
    assert cleaned.last_pass.bytes_read == result.bytes_read > 0
    assert cleaned.dirty_ratio == 0.0


async def test_views_do_not_rescan_every_producer_per_transaction(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3,000 open transactions made the transactions page take over half a second of the
    broker's one thread: each open transaction rescanned every producer of its partition, and
    each partition every transactional id. The work is linear now."""
    from storage.producer_state import ProducerStateManager

    parts = await topic(broker, "t", 4)
    for i in range(40):
        await Txn(broker, f"x{i}").init()
        await Txn(broker, f"x{i}").init()  # a second epoch: still one producer id
    for i in range(40):
        t = Txn(broker, f"x{i}")
        t.producer_id, t.epoch = broker.txns.cache[f"x{i}"].producer_id, 1
        await t.send(parts[i % 4], b"v")
        await t.send(parts[(i + 1) % 4], b"w")
    scans = {"producers": 0, "txn ids": 0, "open txns for the LSO": 0}
    real_iter, real_by_pid = ProducerStateManager.__iter__, partition.txn_by_producer
    real_first_unstable = ProducerStateManager.first_unstable_offset

    def counting_first_unstable(self: ProducerStateManager) -> int | None:
        scans["open txns for the LSO"] += 1
        return real_first_unstable(self)

    def counting_iter(self: ProducerStateManager):  # type: ignore[no-untyped-def]
        scans["producers"] += 1
        return real_iter(self)

    def counting_by_pid(b: Broker):  # type: ignore[no-untyped-def]
        scans["txn ids"] += 1
        return real_by_pid(b)

    monkeypatch.setattr(ProducerStateManager, "__iter__", counting_iter)
    monkeypatch.setattr(ProducerStateManager, "first_unstable_offset", counting_first_unstable)
    monkeypatch.setattr(partition, "txn_by_producer", counting_by_pid)
    monkeypatch.setattr(transactions, "txn_by_producer", counting_by_pid)
    later = NOW + HANG_MS + 1
    stuck = await transactions.hanging_on_partitions(broker, later, HANG_MS)
    rows = await transactions.txn_rows(broker, later, HANG_MS)
    assert len(stuck) == 80 and all(len(r.hanging) == 2 for r in rows)
    assert scans["producers"] == 0 and scans["txn ids"] == 1
    assert scans["open txns for the LSO"] <= 3 * len(parts)  # a few per partition, not per row


async def test_a_consumer_protocol_group(broker: Broker) -> None:
    """A KIP-848 group as ConsumerGroupDescribe shows it: epochs, member state, assignment,
    partitions pending revocation and the target."""
    from coordinator.consumer_group.heartbeat import Heartbeat

    await topic(broker, "t", 2)

    def join(member: str) -> Heartbeat:
        return Heartbeat(
            "cg", member, 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",), owned=()
        )

    assert (await broker.groups.consumer_heartbeat(join("a"), 1)).member_epoch == 1
    assert (await broker.groups.consumer_heartbeat(join("b"), 1)).member_epoch == 2
    row = groups.group_row(broker, "cg")
    assert row is not None and groups.group_ids(broker) == ["cg"]
    assert (row.group_type, row.state, row.protocol, row.generation, row.assignment_epoch) == (
        "consumer",
        "Reconciling",
        "uniform",
        2,
        2,
    )
    a, b = row.members
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    assert (a.member_id, a.member_epoch, a.member_state, a.subscription) == ("a", 1, "stable", "t")
    assert (a.assignment, a.target) == ((t0, t1), (t0,))
    assert (b.member_epoch, b.member_state, b.assignment, b.target) == (
        2,
        "unreleased_partitions",
        (),
        (t1,),
    )
