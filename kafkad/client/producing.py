"""Writing records: idempotent and transactional producer steps over ``Client``.

Theory of operation: like a Kafka 3+ producer, every write is idempotent. InitProducerId
gives a producer id and epoch; each partition's batches carry sequences counted from 0 for
that id and epoch, so a retried batch is recognised by the broker. A transactional write
finds the transaction coordinator, InitProducerId's with the transactional id (fencing any
earlier producer of that id and aborting its open transaction), adds each partition with
AddPartitionsToTxn before producing to it, and ends with EndTxn commit or abort.
Deliberate simplification: one batch per partition per call, no linger, no pipelining.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkad.client.cluster import API, TRANSACTION, Client
from kafkad.client.errors import KafkaError, check
from wire.record_codec import Record, build_batch

__all__ = ["Message", "Producer", "murmur2_partition"]


@dataclass(frozen=True)
class Message:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (the default partitioner's hash), as a signed 32-bit int."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class Producer:
    def __init__(
        self,
        client: Client,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
        compression: int = 0,
    ) -> None:
        self.client = client
        self.transactional_id = transactional_id
        self.compression = compression
        self.coordinator: int | None = None
        self._sequences: dict[tuple[str, int], int] = {}
        self._in_txn: set[tuple[str, int]] = set()
        data = {"transactional_id": transactional_id, "transaction_timeout": transaction_timeout_ms}
        data |= {"producer_id": -1, "producer_epoch": -1}
        if transactional_id is None:
            resp = client.retry(lambda: self._init(client.send(API.INIT_PRODUCER_ID, data)))
        else:
            resp = client.coordinated(
                transactional_id,
                TRANSACTION,
                lambda node: self._init(client.send(API.INIT_PRODUCER_ID, data, node)),
            )
            self.coordinator = client.find_coordinator(transactional_id, TRANSACTION)
        self.producer_id, self.producer_epoch = int(resp.producer_id), int(resp.producer_epoch)

    def _init(self, resp: Any) -> Any:
        check(int(resp.error_code), "InitProducerId")
        return resp

    def send(self, topic: str, partition: int, messages: Sequence[Message]) -> int:
        """Write ``messages`` as one batch; returns the base offset."""
        tp = (topic, partition)
        if self.transactional_id is not None and tp not in self._in_txn:
            self._add_partition(topic, partition)
        seq = self._sequences.get(tp, 0)
        now = int(time.time() * 1000)
        records = [Record(i, 0, m.key, m.value, list(m.headers)) for i, m in enumerate(messages)]
        batch = build_batch(
            records,
            base_timestamp=now,
            compression=self.compression,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=seq,
            transactional=self.transactional_id is not None,
        )
        base = produce_raw(self.client, topic, partition, batch, self.transactional_id)
        self._sequences[tp] = (seq + len(records)) & 0x7FFFFFFF
        return base

    def _add_partition(self, topic: str, partition: int) -> None:
        assert self.transactional_id is not None
        tid = self.transactional_id
        data = {
            "v3_and_below_transactional_id": tid,
            "v3_and_below_producer_id": self.producer_id,
            "v3_and_below_producer_epoch": self.producer_epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [partition]}],
        }

        def once(node: int) -> None:
            resp = self.client.send(API.ADD_PARTITIONS_TO_TXN, data, node)
            for t in resp.results_by_topic_v3_and_below:
                for p in t.results_by_partition:
                    check(
                        int(p.partition_error_code),
                        f"adding {topic}-{partition} to transaction {tid!r}",
                    )

        self.client.coordinated(tid, TRANSACTION, once)
        self._in_txn.add((topic, partition))

    def end(self, commit: bool) -> None:
        """EndTxn; a transaction that added no partition ends locally, as in Kafka's
        producer (the coordinator would refuse EndTxn for it with INVALID_TXN_STATE)."""
        assert self.transactional_id is not None
        if not self._in_txn:
            return
        tid = self.transactional_id
        data = {
            "transactional_id": tid,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "committed": commit,
        }

        def once(node: int) -> None:
            resp = self.client.send(API.END_TXN, data, node)
            check(
                int(resp.error_code),
                f"{'committing' if commit else 'aborting'} transaction {tid!r}",
            )

        self.client.coordinated(tid, TRANSACTION, once)
        self._in_txn.clear()


def produce_raw(
    client: Client, topic: str, partition: int, batch: bytes, transactional_id: str | None = None
) -> int:
    """Send one prepared batch to the partition's leader (acks=all); returns its base offset."""
    data = {
        "transactional_id": transactional_id,
        "acks": -1,
        "timeout": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }

    def once() -> int:
        resp = client.send(API.PRODUCE, data, client.leader(topic, partition))
        (t,) = resp.responses
        (p,) = t.partition_responses
        code = int(p.error_code)
        if code:
            raise KafkaError(
                code, f"producing to {topic}-{partition}", getattr(p, "error_message", None)
            )
        return int(p.base_offset)

    return client.retry(once)
