"""The connector's Kafka side, through confluent-kafka (librdkafka): metadata and offsets for
the driver, range reads and transactional writes for the tasks. No Spark here.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from pipeline import markers
from pipeline.options import OptionError, ReadOptions, Subscription, WriteOptions
from pipeline.planning import TP, OffsetRange, Positions

T = TypeVar("T")
REQUEST_TIMEOUT_S = 30.0
CHUNK = 10_000  # messages per consume() call / rows per Arrow batch


def consumer_config(opts: ReadOptions) -> dict[str, Any]:
    return {
        **opts.client,
        "bootstrap.servers": opts.bootstrap_servers,
        "group.id": opts.group_id or f"{opts.group_id_prefix}-{uuid.uuid4()}",
        "isolation.level": opts.isolation_level,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        # An offset deleted under a planned range must not make the client jump to the end
        # silently: read_range decides (failOnDataLoss).
        "auto.offset.reset": "error",
    }


class DataLossError(RuntimeError):
    """Offsets to read are gone (failOnDataLoss=true): the message names the partition and
    offsets, as Spark's connector does."""


def check_client_config(config: dict[str, Any], kind: Callable[[dict[str, Any]], object]) -> None:
    """librdkafka refuses unknown or invalid properties at construction: fail fast on the
    driver, naming the option as the job spelled it."""
    try:
        kind(config)
    except (KafkaException, ValueError, TypeError) as exc:
        raise OptionError(f"a kafka.* option is invalid: {exc}") from None


class Offsets:
    """Driver side of the source: the partitions a subscription covers and their bounds."""

    def __init__(self, opts: ReadOptions) -> None:
        self._opts = opts
        config: dict[str, str | int | float | bool] = {
            **opts.client,
            "bootstrap.servers": opts.bootstrap_servers,
        }
        for owned in ("group.id", "isolation.level", "enable.auto.commit"):
            config.pop(owned, None)
        self._admin = AdminClient(config)

    def _attempts(self, what: str, call: Callable[[], T]) -> T:
        """Spark's KafkaOffsetReader: fetchOffset.numRetries attempts in all (at least one),
        fetchOffset.retryIntervalMs apart, then the last error."""
        attempts = max(1, self._opts.fetch_offset_num_retries)
        for attempt in range(attempts):
            try:
                return call()
            except KafkaException:
                if attempt == attempts - 1:
                    raise
                time.sleep(self._opts.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError(what)

    def partitions(self) -> list[TP]:
        sub: Subscription = self._opts.subscription
        meta = self._attempts(
            "list_topics", lambda: self._admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        )
        found = sorted(
            (name, p)
            for name, topic in meta.topics.items()
            if topic.error is None and sub.matches(name)
            for p in topic.partitions
        )
        if sub.kind == "assign":
            missing = set(sub.assigned) - set(found)
            if missing:
                raise OptionError(f"option 'assign': no such partitions {sorted(missing)}")
            return list(sub.assigned)
        return found

    def bounds(self, tps: Iterable[TP], which: str) -> Positions:
        """earliest, or latest: the last stable offset at read_committed, else the high
        watermark."""
        tps = list(tps)
        if not tps:
            return {}
        spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()  # type: ignore[no-untyped-call]
        level = (
            IsolationLevel.READ_COMMITTED
            if self._opts.isolation_level == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )

        def fetch() -> Positions:
            futures = self._admin.list_offsets(
                {TopicPartition(t, p): spec for t, p in tps},
                isolation_level=level,
                request_timeout=REQUEST_TIMEOUT_S,
            )
            return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}

        return self._attempts("list_offsets", fetch)


def read_range(opts: ReadOptions, r: OffsetRange) -> Iterator[list[Message]]:
    """The records of [from_offset, until_offset) in chunks. Offsets that are transaction
    markers or (at read_committed) aborted records are skipped by the client; the range is
    done when the client's position reaches its end. Offsets of the range that retention (or a
    re-created topic) removed before they were read fail the read with failOnDataLoss=true;
    with false the read goes on from the earliest offset still there, like Spark's
    KafkaDataConsumer."""
    consumer = Consumer(consumer_config(opts))
    tp = TopicPartition(r.topic, r.partition, r.from_offset)
    try:
        consumer.assign([tp])
        position = r.from_offset
        idle_deadline = time.monotonic() + opts.poll_timeout_ms / 1000
        while position < r.until_offset:
            msgs = consumer.consume(min(CHUNK, r.until_offset - position), 0.2)
            chunk: list[Message] = []
            for m in msgs:
                err = m.error()
                if err is not None and err.code() == KafkaError._AUTO_OFFSET_RESET:
                    position = _out_of_range(opts, consumer, r, position)
                    break
                if err is not None:
                    raise KafkaException(err)
                offset = m.offset() or 0
                if offset < r.until_offset:
                    chunk.append(m)
                position = max(position, offset + 1)
            if chunk:
                yield chunk
            if position < r.until_offset:
                (pos,) = consumer.position([TopicPartition(r.topic, r.partition)])
                if pos.offset is not None and pos.offset > position:
                    position = pos.offset
            if msgs or position >= r.until_offset:
                idle_deadline = time.monotonic() + opts.poll_timeout_ms / 1000
            elif time.monotonic() > idle_deadline:
                raise TimeoutError(
                    f"{r.topic}-{r.partition}: no progress at offset {position} of"
                    f" [{r.from_offset}, {r.until_offset}) in {opts.poll_timeout_ms} ms"
                )
    finally:
        consumer.close()


def _out_of_range(opts: ReadOptions, consumer: Consumer, r: OffsetRange, position: int) -> int:
    """The broker answered OFFSET_OUT_OF_RANGE at `position`: fail (failOnDataLoss) or go on
    from the earliest offset still there. Returns the new position (the range's end when
    nothing of it is left)."""
    here = TopicPartition(r.topic, r.partition)
    low, high = consumer.get_watermark_offsets(here, REQUEST_TIMEOUT_S, cached=False)
    where = f"{r.topic}-{r.partition}"
    if position < low:
        what = (
            f"offsets [{position}, {min(low, r.until_offset)}) of the planned range"
            f" [{r.from_offset}, {r.until_offset}) of {where} were deleted before they were read"
            f" (the earliest offset is now {low})"
        )
        resume = low
    else:  # past the end: the partition was truncated, or the topic re-created
        what = (
            f"offset {position} of the planned range [{r.from_offset}, {r.until_offset}) of"
            f" {where} is past the partition's end {high} (the topic was re-created?)"
        )
        resume = r.until_offset
    if opts.fail_on_data_loss:
        raise DataLossError(f"{what}; set failOnDataLoss=false to skip them")
    if resume < r.until_offset:
        # a fetcher stopped by the error takes no seek: assign again
        consumer.assign([TopicPartition(r.topic, r.partition, resume)])
    return min(resume, r.until_offset)


def _retry(what: str, call: Callable[[], T], attempts: int = 20) -> T:
    """Retries what librdkafka calls retriable (e.g. CONCURRENT_TRANSACTIONS while a previous
    incarnation's transaction is being completed)."""
    for attempt in range(attempts):
        try:
            return call()
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if not err.retriable() or attempt == attempts - 1:
                raise
            time.sleep(min(0.05 * 2**attempt, 1.0))
    raise AssertionError(what)


def _marker_reader(opts: WriteOptions, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": opts.bootstrap_servers,
            "group.id": group,
            "isolation.level": "read_committed",  # OffsetFetch with RequireStable
            "enable.auto.commit": False,
        }
    )


def _read_marker(consumer: Consumer, tp: TopicPartition, query_id: str) -> markers.Marker | None:
    (got,) = _retry("committed", lambda: consumer.committed([tp], REQUEST_TIMEOUT_S))
    if got.error is not None:
        raise KafkaException(got.error)
    return markers.decode(got.offset, getattr(got, "metadata", None), query_id)


# One transaction spans a whole sink task, including the lazy upstream work that produces its
# rows. librdkafka's default transaction.timeout.ms (60 s) would have the coordinator abort any
# task longer than a minute, on every attempt; the default here is Kafka's default
# transaction.max.timeout.ms (15 min), the longest a broker accepts unless configured
# otherwise. kafka.transaction.timeout.ms overrides it (README: the trade-off).
TRANSACTION_TIMEOUT_MS = 900_000


def producer_config(opts: WriteOptions, txn_id: str) -> dict[str, Any]:
    return {
        "linger.ms": 5,
        # keyed rows go where the Java client and Spark's Kafka sink put them (murmur2;
        # librdkafka's default is CRC32); rows without a key: a random partition
        "partitioner": "murmur2_random",
        "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        **opts.client,
        "bootstrap.servers": opts.bootstrap_servers,
        "transactional.id": txn_id,
    }


def marker_tp(opts: WriteOptions) -> TopicPartition:
    assert opts.marker_topic is not None
    return TopicPartition(opts.marker_topic, 0)


def record_done(opts: WriteOptions, query_id: str, batch_id: int) -> None:
    """The driver's record that every task of this micro-batch committed (a plain offset
    commit to the sink's done group; no transaction needed: it only ever moves forward)."""
    group = markers.done_group(opts.transactional_id_prefix, query_id)
    consumer = _marker_reader(opts, group)
    try:
        offset, meta = markers.encode(query_id, batch_id)
        tp = marker_tp(opts)
        mark = TopicPartition(tp.topic, tp.partition, offset, metadata=meta)
        _retry("commit", lambda: consumer.commit(offsets=[mark], asynchronous=False))
    finally:
        consumer.close()


class TxnTask:
    """One sink task's transactional producer and its markers.

    `open()` fences any earlier incarnation of the transactional id (InitProducerId aborts or
    completes its transaction) and only then reads the markers, so what it reads is final.
    """

    def __init__(self, opts: WriteOptions, query_id: str, task_partition: int) -> None:
        self.opts = opts
        self.query_id = query_id
        self.marker_tp = marker_tp(opts)
        prefix = opts.transactional_id_prefix
        txn_id = markers.transactional_id(prefix, query_id, task_partition)
        self.producer = Producer(producer_config(opts, txn_id))
        self.consumer = _marker_reader(opts, markers.marker_group(prefix, query_id, task_partition))
        self.done_reader = _marker_reader(opts, markers.done_group(prefix, query_id))

    def open(self) -> tuple[markers.Marker | None, markers.Marker | None]:
        """Fence earlier incarnations; return (the driver's batch-complete record, this task's
        committed marker)."""
        _retry("init_transactions", lambda: self.producer.init_transactions(REQUEST_TIMEOUT_S))
        done = _read_marker(self.done_reader, self.marker_tp, self.query_id)
        return done, _read_marker(self.consumer, self.marker_tp, self.query_id)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def produce(self, topic: str, value: Any, key: Any, partition: int, headers: Any) -> None:
        while True:
            try:
                self.producer.produce(topic, value, key, partition, headers=headers)
                return
            except BufferError:
                self.producer.poll(0.05)  # the local queue is full: let deliveries drain

    def commit(self, batch_id: int, digest: markers.InputDigest) -> None:
        """The marker joins the transaction, then everything commits at once."""
        offset, meta = markers.encode(self.query_id, batch_id, digest)
        mark = TopicPartition(self.marker_tp.topic, 0, offset, metadata=meta)
        try:
            self.producer.send_offsets_to_transaction(
                [mark], self.consumer.consumer_group_metadata(), REQUEST_TIMEOUT_S
            )
            _retry("commit", lambda: self.producer.commit_transaction(REQUEST_TIMEOUT_S))
        except KafkaException as exc:
            if exc.args[0].txn_requires_abort():
                self.abort()
            raise

    def abort(self) -> None:
        # Fenced or fatal: the next incarnation's InitProducerId aborts it.
        with contextlib.suppress(KafkaException):
            self.producer.abort_transaction(REQUEST_TIMEOUT_S)

    def close(self) -> None:
        self.consumer.close()
        self.done_reader.close()
