"""One workload worker, run as a subprocess so the runner can SIGKILL it mid-transaction:
``python -u -m compat_tests.workload.worker CONFIG_JSON``. It writes its history events
(``checker.py`` lists them) one JSON object a line on stdout, each written and flushed
*before* the client call it announces (``end`` invoke) or right after the client reported
(``ack``, ``end`` ok, ``poll``); ``{"type": "hb"}`` lines tell the runner it is not stuck.
Closing its stdin asks it to finish its transaction and exit 0.

Roles (``role`` in the config), each with ``client`` ``confluent`` or ``kafka-python``, or for
producers and copiers ``tv2``/``raw-classic``: kafkad's raw-protocol producer
(``kafkad/client/txn_producer.py``) in Java 4.x's transaction-version-2 flow or the classic
one, its copier reading through a kafka-python group consumer:

* ``producer``: transactions of 1..``max_sends`` unique values over the data topics and the
  copiers' input topic, committed, or aborted with probability ``abort_p``.
* ``copier`` (consume-transform-produce): polls the input topic in group
  ``group`` at read_committed, copies each record to the output topic in a transaction that
  also commits the consumed offsets (send_offsets_to_transaction with the consumer's group
  metadata); after an abort it seeks back to what it had consumed since its last commit
  (KAFKA-17582: the position is not rewound by the abort).
* ``reader``: a read_committed group consumer of every topic, reporting each poll.

A failure it cannot classify exits with code 3 after writing what it knows: the runner
starts a new instance with the same transactional.id, whose InitProducerId fences this one and
aborts its open transaction. A commit asked but not acknowledged is left indeterminate, never
followed by an abort event (it may have committed).
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from typing import Any

GAVE_UP = 3
OP_TIMEOUT_S = 20.0
_out_lock = threading.Lock()
stop = threading.Event()


def emit(kind: str, **fields: Any) -> None:
    line = json.dumps({"type": kind, "t": time.monotonic_ns(), **fields})
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _watch_stdin() -> None:
    try:
        while sys.stdin.read(4096):
            pass
    finally:
        stop.set()


def gave_up(why: str) -> None:
    emit("note", what=f"gave up: {why}")
    sys.stdout.flush()
    os._exit(GAVE_UP)


class Confluent:
    """The transactional calls of confluent-kafka, retried while retriable."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        from confluent_kafka import Producer

        self.p = Producer(
            {
                "bootstrap.servers": cfg["bootstrap"],
                "transactional.id": cfg["tid"],
                "transaction.timeout.ms": cfg["txn_timeout_ms"],
                "linger.ms": 5,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 300,
                "retry.backoff.ms": 20,
                "retry.backoff.max.ms": 300,
                "message.timeout.ms": cfg["txn_timeout_ms"],
            }
        )
        self.call(self.p.init_transactions, OP_TIMEOUT_S)

    @staticmethod
    def call(fn: Any, *args: Any) -> Any:
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + OP_TIMEOUT_S
        while True:
            try:
                return fn(*args)
            except KafkaException as exc:
                err = exc.args[0]
                if err.retriable() and time.monotonic() < deadline:
                    continue
                raise

    @staticmethod
    def abortable(exc: BaseException) -> bool:
        from confluent_kafka import KafkaException

        if not isinstance(exc, KafkaException):
            return False
        err = exc.args[0]
        return bool(err.txn_requires_abort() and not err.fatal())

    def send(self, topic: str, partition: int, value: str) -> None:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                emit("ack", value=value, offset=msg.offset())
            else:
                emit("ack", value=value, error=str(err))

        while True:
            try:
                self.p.produce(topic, value.encode(), partition=partition, on_delivery=on_delivery)
                return
            except BufferError:
                self.p.poll(0.1)

    def begin(self) -> None:
        self.p.begin_transaction()

    def flush(self) -> None:
        if self.p.flush(OP_TIMEOUT_S) != 0:
            raise TimeoutError("flush")

    def commit(self) -> None:
        self.call(self.p.commit_transaction, OP_TIMEOUT_S)

    def abort(self) -> None:
        self.call(self.p.abort_transaction, OP_TIMEOUT_S)


class KafkaPython:
    def __init__(self, cfg: dict[str, Any]) -> None:
        from kafka import KafkaProducer

        self.p = KafkaProducer(
            bootstrap_servers=cfg["bootstrap"],
            transactional_id=cfg["tid"],
            transaction_timeout_ms=cfg["txn_timeout_ms"],
            linger_ms=5,
            reconnect_backoff_ms=20,
            reconnect_backoff_max_ms=300,
            retry_backoff_ms=20,
            max_block_ms=int(OP_TIMEOUT_S * 1000),
            request_timeout_ms=10_000,
        )
        self.p.init_transactions()

    @staticmethod
    def abortable(exc: BaseException) -> bool:
        return False  # kafka-python: start afresh (a new instance fences this one)

    def send(self, topic: str, partition: int, value: str) -> None:
        fut = self.p.send(topic, value.encode(), partition=partition)
        fut.add_callback(lambda md: emit("ack", value=value, offset=md.offset))
        fut.add_errback(lambda exc: emit("ack", value=value, error=repr(exc)))

    def begin(self) -> None:
        self.p.begin_transaction()

    def flush(self) -> None:
        self.p.flush(OP_TIMEOUT_S)

    def commit(self) -> None:
        self.p.commit_transaction()

    def abort(self) -> None:
        self.p.abort_transaction()


class RawTxn:
    """kafkad's raw-protocol producer; ``send`` buffers, ``flush`` writes one batch per
    partition (as a linger would)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        from kafkad.client.txn_producer import TxnProducer
        from kafkad.client.txn_transport import SocketTransport

        self.t = SocketTransport(cfg["bootstrap"], timeout_s=10.0, client_id=cfg["tid"])
        # as Java 4.x's producer: the TV2 flow only at a finalized transaction.version >= 2
        self.p = TxnProducer(
            self.t,
            cfg["tid"],
            tv2=cfg["client"] == "tv2" and self.t.why_no_tv2() is None,
            transaction_timeout_ms=cfg["txn_timeout_ms"],
            op_timeout_s=OP_TIMEOUT_S,
        )
        self.p.init_transactions()
        self.pending: dict[tuple[str, int], list[str]] = {}

    @staticmethod
    def abortable(exc: BaseException) -> bool:
        from kafkad.client.txn_producer import TxnAbortable

        return isinstance(exc, TxnAbortable)

    def send(self, topic: str, partition: int, value: str) -> None:
        self.pending.setdefault((topic, partition), []).append(value)

    def begin(self) -> None:
        self.pending.clear()
        self.p.begin()

    def flush(self) -> None:
        pending, self.pending = self.pending, {}
        for (topic, partition), values in pending.items():
            base = self.p.send(topic, partition, [v.encode() for v in values])
            for i, value in enumerate(values):
                if base < 0:  # DUPLICATE_SEQUENCE_NUMBER: in the log, at an offset not told
                    emit("ack", value=value, error="duplicate, offset unknown")
                else:
                    emit("ack", value=value, offset=base + i)

    def commit(self) -> None:
        self.p.commit()

    def abort(self) -> None:
        self.p.abort()


RAW = ("tv2", "raw-classic")


def client_for(cfg: dict[str, Any]) -> Confluent | KafkaPython | RawTxn:
    if cfg["client"] in RAW:
        return RawTxn(cfg)
    return KafkaPython(cfg) if cfg["client"] == "kafka-python" else Confluent(cfg)


def producer(cfg: dict[str, Any]) -> None:
    rng = random.Random(cfg["seed"])
    worker = cfg["worker"]
    tps = [(t, p) for t, n in cfg["topics"] for p in range(n)]
    c = client_for(cfg)
    n = 0
    while not stop.is_set() and n < cfg["max_txns"]:
        emit("hb")
        txn = f"{worker}.{n}"
        n += 1
        commit = rng.random() >= cfg["abort_p"]
        asked_commit = False
        emit("begin", txn=txn, worker=worker)
        try:
            c.begin()
            for i in range(rng.randint(1, cfg["max_sends"])):
                topic, p = rng.choice(tps)
                value = f"{txn}.{i}"
                emit("send", txn=txn, topic=topic, partition=p, value=value)
                c.send(topic, p, value)
            c.flush()
            emit("end", txn=txn, commit=commit, phase="invoke")
            asked_commit = commit
            c.commit() if commit else c.abort()
            emit("end", txn=txn, commit=commit, phase="ok")
        except Exception as exc:  # a client error: classify, recover or give up
            emit("end", txn=txn, commit=commit, phase="fail", error=repr(exc)[:300])
            if asked_commit or not c.abortable(exc):
                gave_up(repr(exc)[:300])
            try:
                emit("end", txn=txn, commit=False, phase="invoke")
                c.abort()
                emit("end", txn=txn, commit=False, phase="ok")
            except Exception as again:
                gave_up(repr(again)[:300])
        time.sleep(rng.random() * cfg["pause_s"])


class ConfluentSource:
    """The copier's input through a confluent-kafka group consumer, and its offsets."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        from confluent_kafka import Consumer

        conf: dict[str, Any] = {
            "bootstrap.servers": cfg["bootstrap"],
            "group.id": cfg["group"],
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "reconnect.backoff.max.ms": 300,
        }
        if cfg["client"] == "confluent-consumer":  # KIP-848: the broker sets the timeouts
            conf["group.protocol"] = "consumer"
        else:
            conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        self.consumer = Consumer(conf)
        self.consumer.subscribe([cfg["input"]])

    def poll(self, n: int) -> list[list[Any]]:
        msgs = [m for m in self.consumer.consume(n, 0.5) if m.error() is None]
        return [[m.topic(), m.partition(), m.offset(), m.value().decode()] for m in msgs]

    def send_offsets(self, c: Any, offsets: list[list[Any]]) -> None:
        from confluent_kafka import TopicPartition

        tps = [TopicPartition(t, p, o) for t, p, o in offsets]
        meta = self.consumer.consumer_group_metadata()
        c.call(c.p.send_offsets_to_transaction, tps, meta, OP_TIMEOUT_S)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        from confluent_kafka import TopicPartition

        self.consumer.seek(TopicPartition(topic, partition, offset))

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonSource:
    def __init__(self, cfg: dict[str, Any]) -> None:
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(
            cfg["input"],
            bootstrap_servers=cfg["bootstrap"],
            group_id=cfg["group"],
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            reconnect_backoff_max_ms=300,
        )

    def poll(self, n: int) -> list[list[Any]]:
        # 1 s: kafka-python loses a rejoin at short poll timeouts (see group_consumer.py)
        batch = self.consumer.poll(timeout_ms=1000, max_records=n)
        return [
            [r.topic, r.partition, r.offset, r.value.decode()] for rs in batch.values() for r in rs
        ]

    def send_offsets(self, c: Any, offsets: list[list[Any]]) -> None:
        from kafka import OffsetAndMetadata, TopicPartition

        if isinstance(c, RawTxn):
            meta = self.consumer.group_metadata()
            c.flush()  # this copier's batches first, as Java's producer sends them
            offs_raw = [(t, p, o) for t, p, o in offsets]
            gen, member, instance = meta.generation_id, meta.member_id, meta.group_instance_id
            c.p.send_offsets(meta.group_id, offs_raw, gen, member, instance)
            return
        offs = {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for t, p, o in offsets}
        c.p.send_offsets_to_transaction(offs, self.consumer.group_metadata())

    def seek(self, topic: str, partition: int, offset: int) -> None:
        from kafka import TopicPartition

        self.consumer.seek(TopicPartition(topic, partition), offset)

    def close(self) -> None:
        self.consumer.close()


def copier(cfg: dict[str, Any]) -> None:
    rng = random.Random(cfg["seed"])
    worker = cfg["worker"]
    out_topic, out_parts = cfg["output"]
    kp = cfg["client"] in ("kafka-python", *RAW)
    source = KafkaPythonSource(cfg) if kp else ConfluentSource(cfg)
    c = client_for(cfg)
    n = 0
    try:
        while not stop.is_set():
            emit("hb")
            try:
                recs = source.poll(cfg["max_sends"])
            except Exception as exc:  # kafka-python raises connection errors from poll
                emit("note", what=f"poll: {exc!r}"[:300])
                time.sleep(0.2)
                continue
            if not recs:
                continue
            emit("poll", reader=worker, isolation="read_committed", records=recs)
            txn = f"{worker}.{n}"
            n += 1
            commit = rng.random() >= cfg["abort_p"]
            asked_commit = False
            first: dict[tuple[str, int], int] = {}
            nxt: dict[tuple[str, int], int] = {}
            for t, p, off, _ in recs:
                first.setdefault((t, p), off)
                nxt[(t, p)] = off + 1
            emit("begin", txn=txn, worker=worker)
            try:
                c.begin()
                for i, (t, p, off, _) in enumerate(recs):
                    value = f"{txn}.{i}"
                    out_p = rng.randrange(out_parts)
                    src = [t, p, off]
                    emit("send", txn=txn, topic=out_topic, partition=out_p, value=value, src=src)
                    c.send(out_topic, out_p, value)
                offsets = [[t, p, o] for (t, p), o in sorted(nxt.items())]
                emit("offsets", txn=txn, group=cfg["group"], offsets=offsets)
                source.send_offsets(c, offsets)
                c.flush()
                emit("end", txn=txn, commit=commit, phase="invoke")
                asked_commit = commit
                c.commit() if commit else c.abort()
                emit("end", txn=txn, commit=commit, phase="ok")
            except Exception as exc:
                emit("end", txn=txn, commit=commit, phase="fail", error=repr(exc)[:300])
                if asked_commit or not c.abortable(exc):
                    gave_up(repr(exc)[:300])
                try:
                    emit("end", txn=txn, commit=False, phase="invoke")
                    c.abort()
                    emit("end", txn=txn, commit=False, phase="ok")
                except Exception as again:
                    gave_up(repr(again)[:300])
                commit = False
            if not commit:  # KAFKA-17582: rewind to what the aborted transaction consumed
                for (t, p), off in first.items():
                    try:
                        source.seek(t, p, off)
                    except Exception as exc:  # revoked meanwhile: its new owner starts there
                        emit("note", what=f"seek {t}/{p}: {exc!r}"[:300])
    finally:
        source.close()


def reader(cfg: dict[str, Any]) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": cfg["bootstrap"],
            "group.id": cfg["group"],
            "isolation.level": "read_committed",
            "enable.auto.commit": True,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000,
            "reconnect.backoff.max.ms": 300,
        }
    )
    consumer.subscribe([t for t, _ in cfg["topics"]])
    try:
        while not stop.is_set():
            emit("hb")
            msgs = [m for m in consumer.consume(200, 0.5) if m.error() is None]
            if msgs:
                recs = [[m.topic(), m.partition(), m.offset(), m.value().decode()] for m in msgs]
                emit("poll", reader=cfg["worker"], isolation="read_committed", records=recs)
    finally:
        consumer.close()


ROLES = {"producer": producer, "copier": copier, "reader": reader}


def main() -> None:
    cfg = json.loads(sys.argv[1])
    threading.Thread(target=_watch_stdin, daemon=True).start()
    ROLES[cfg["role"]](cfg)
    emit("note", what="done")


if __name__ == "__main__":
    main()
