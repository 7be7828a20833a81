"""Produce (key 0). Advertised v0-13, served v3-13: Kafka 4 removed v0-2 but still advertises
min 0 because librdkafka disables compression when it sees a higher minimum (KAFKA-18659,
spec §1.1); a v0-2 request is refused as an unsupported version. v3: transactional id, record
batch v2 only. v5: log start offset in the response. v7: zstd allowed. v8: record errors and
an error message. v9: flexible. v10-11: nothing new for a single node. v12 (KIP-890 part 2,
transaction version 2): the first transactional batch of a producer epoch on a partition adds
the partition to the transaction through the coordinator (``proxy/txn_implicit_add.py``), no
AddPartitionsToTxn from the client. v13 (KIP-516, Kafka 4.1+): topics by id, in the request
and the response; an id this broker does not know is UNKNOWN_TOPIC_ID on each of its
partitions (Kafka's ``handleProduceRequest``), found as Fetch finds them (``TopicManager.by_id``).

The handler takes each version's request as sent (``as_sent``: v13 has no topic names to
convert to), reading it by attribute only, and answers in ``wire.produce_response``'s
``ProduceAnswer`` (plain values, no kio objects: they cost ~7 µs of a one-record produce with
cold caches), which ``wire/produce_response.py`` writes for every version; a request refused
as a whole is answered in kio's classes (``_refuse_all``, also the dispatcher's error reply).

Per partition, after the request-level checks that are Kafka's ReplicaManager's (acks, a
known partition, no appends to internal topics, a transactional id for transactional batches):
the batch goes through ``storage.log_validator.validate_for_append`` (Kafka's LogValidator:
header and CRC, every record — structure and count, keys on compacted topics, timestamps —,
a compressed payload streamed with bounded memory, the transactional rules); then
its offsets are assigned in place, and it is appended (after each ``YIELD_BYTES`` of batches
the handler yields: a free partition lock is taken without one, ``storage/append_lock.py``, and
a request to many partitions must not hold the run loop for its whole length); a storage
failure answers KAFKA_STORAGE_ERROR (never UNKNOWN_SERVER_ERROR: clients may then retry a
write that happened, spec §3.3). Record errors (keys, timestamps) come back in
``record_errors`` (v8+) with Kafka's messages. Produce never auto-creates topics (only
Metadata does, as in Kafka).

acks=0 gets no response at all: a refused partition, or any failure of the request, closes
the connection instead (Kafka's ``ProduceRequest.getErrorResponse`` is null for acks=0; the
dispatcher does the same for a handler that raised).

Malformed batches: where Kafka's batch iterator throws while it looks for transactional
batches (a size field below 14, a magic byte outside 0..2, in some partition's first batch,
before any transactional one) Kafka fails the whole request, every partition answered
CORRUPT_MESSAGE, and so do we (logged in one WARNING line). Other malformed batches are
refused per partition by ``validate_produce_batch``.

Idempotent batches (a producer id, not transactional) go through the partition's producer
state (spec §3.2, ``storage/producer_state.py``): a retried duplicate of one of the last 5
batches is answered NONE with its original base offset, a stale epoch INVALID_PRODUCER_EPOCH,
a sequence gap OUT_OF_ORDER_SEQUENCE_NUMBER.

Authorization (Kafka's ``handleProduceRequest``): a request carrying a transactional batch
needs WRITE on its transactional id, else every partition is answered
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then each topic needs WRITE, else its partitions get
TOPIC_AUTHORIZATION_FAILED (before any other per-partition check), then an unknown partition
UNKNOWN_TOPIC_OR_PARTITION, then acks other than 0, 1, -1 INVALID_REQUIRED_ACKS, then an
internal topic INVALID_TOPIC_EXCEPTION. Kafka 4 checks no
IDEMPOTENT_WRITE here: InitProducerId does (KIP-679).

Transactional batches (spec §3.2, §4.8): a request carrying one without a transactional id is
answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition, as Kafka's
``handleProduceRequest`` does (``RequestUtils.hasTransactionalRecords``); a transactional batch
without a producer id is INVALID_RECORD. Without a transaction coordinator
(``Broker.txn_verifier`` is None) transactional batches are refused with INVALID_RECORD. With
one, the first transactional batch of a producer on a partition is verified (KIP-890 part 1)
inside the partition's append, after the duplicate and epoch checks; its answer is returned
as is and wire/errors.py rewrites it for Produce (TRANSACTION_ABORTABLE -> INVALID_TXN_STATE
below v11, PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH, retriable coordinator errors ->
NOT_ENOUGH_REPLICAS, except CONCURRENT_TRANSACTIONS from v12). A plain batch of a producer
with a transaction open is INVALID_TXN_STATE. Such a first batch also starts the producer's
verification state on the partition (before the v12 add, before the v3-11 verification), and
the verified batch is OUT_OF_ORDER_SEQUENCE_NUMBER (no error message, as Kafka's
ReplicaManager answers an append that threw it) when it comes from a v12+ request, nothing
of the producer is retained on the partition and its sequence is not 0, or when its sequence
is above the lowest one a verification saw (``storage/producer_state.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio
import trio.lowlevel
from kio.schema.errors import ErrorCode
from kio.schema.produce.v13.request import ProduceRequest
from kio.schema.produce.v13.response import ProduceResponse

from coordinator.txn.feature import TV2_FROM
from proxy.acl.checks import allowed_names
from proxy.acl.model import AclOperation, ResourceType
from proxy.context import RequestContext
from proxy.outcomes import NO_RESPONSE, CloseConnection
from proxy.registry import handler
from proxy.txn_implicit_add import add_for_produce
from storage.api import StorageError, TopicPartition
from storage.log_validator import Refused, validate_for_append
from wire.produce_response import (
    PartitionAnswer,
    ProduceAnswer,
    RecordErrors,
    TopicAnswer,
    as_kio,
    write_answer,
)
from wire.records import ATTR_TRANSACTIONAL, first_batch_transactional

log = logging.getLogger("kafkad.produce")


def _has_transactional_records(topic_data: Any) -> bool | ErrorCode:
    """Kafka's RequestUtils.hasTransactionalRecords: some partition's first batch is
    transactional; CORRUPT_MESSAGE where Kafka's batch iterator throws on the way there."""
    for t in topic_data:
        for pd in t.partition_data:
            found = first_batch_transactional(pd.records or b"")
            if found is not False:
                return found
    return False


TOPIC_ID_VERSION = 13
_NONE = ErrorCode.none  # a module global: an enum member's lookup through its class is slower
_TV2_FROM = TV2_FROM[0]  # Produce v12+: a transaction of transaction version 2
YIELD_BYTES = 1 << 20  # a Produce lets other tasks run after each this many bytes of batches


def _names(ctx: RequestContext, req: Any) -> list[str | None]:
    """Each topic's name (v13+: of its id, None for an id this broker does not know)."""
    if ctx.version < TOPIC_ID_VERSION:
        return [t.name for t in req.topic_data]
    topics = ctx.broker.topics
    return [
        None if (found := topics.by_id(t.topic_id)) is None else found.name for t in req.topic_data
    ]


def _refuse_all(req: Any, code: ErrorCode) -> ProduceResponse:
    """Every partition of the request refused with ``code``: the answer to a request Kafka
    fails as a whole, and this handler's error reply (``ProduceRequest.getErrorResponse``),
    in v13's classes for a v13 request, else v12's (``write`` converts them down)."""
    version = int(req.__version__)
    topics = tuple(
        TopicAnswer(None, t.topic_id, parts)
        if version >= TOPIC_ID_VERSION
        else TopicAnswer(t.name, None, parts)
        for t in req.topic_data
        for parts in [tuple(PartitionAnswer(pd.index, code) for pd in t.partition_data)]
    )
    answer: ProduceResponse = as_kio(ProduceAnswer(topics), version)
    return answer


def _verify_with(
    verifier: Callable[[str, int, int, TopicPartition], ErrorCode],
    txn_id: str,
    producer_id: int,
    epoch: int,
    tp: TopicPartition,
) -> Callable[[], ErrorCode]:
    return lambda: verifier(txn_id, producer_id, epoch, tp)


@handler(
    api_key=0,
    versions=(0, 13),
    request=ProduceRequest,
    response=ProduceResponse,
    error_reply=_refuse_all,
    min_served=3,
    encode=write_answer,
    as_sent=True,
)
async def produce(ctx: RequestContext, req: ProduceRequest) -> Any:
    broker = ctx.broker
    acks = req.acks
    now = broker.now_ms()
    txn_id = req.transactional_id
    topic_data: Any = req.topic_data
    transactional = _has_transactional_records(topic_data)
    if transactional is not False:
        if transactional is not True:  # CORRUPT_MESSAGE
            log.warning("produce from %s: a malformed batch fails the request", ctx.peer or "?")
            if acks == 0:
                raise CloseConnection("acks=0 produce with a malformed batch")
            return _refuse_all(req, transactional)
        if txn_id is None or not ctx.authorized(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id
        ):
            if acks == 0:
                raise CloseConnection("acks=0 transactional produce not authorized")
            return _refuse_all(req, ErrorCode.transactional_id_authorization_failed)
    version = ctx.version
    topics = broker.topics
    names: list[str | None] | None = None  # v0-12 without an authorizer: each topic's own name
    writable: set[str] | None = None  # None: every topic (no authorizer)
    if version >= TOPIC_ID_VERSION or broker.authorizer is not None:
        names = _names(ctx, req)
        known = [name for name in names if name is not None]
        writable = allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC, known)
    by_id = version >= TOPIC_ID_VERSION
    verifier = broker.txn_verifier
    tv2 = version >= _TV2_FROM
    produced = broker.metrics.topics.produced  # /metrics: bytes and messages in per topic
    results = []
    unyielded = 0  # bytes of batches handled since the last yield
    for n, t in enumerate(topic_data):
        name = t.name if names is None else names[n]
        topic = None if name is None else topics.get(name)
        parts = []
        for pd in t.partition_data:
            index = pd.index
            data = pd.records or b""
            code, message, base, append_time, start = _NONE, None, -1, -1, -1
            record_errors: RecordErrors = ()
            partition = None if name is None else topics.partition(name, index)
            if name is None:
                code = ErrorCode.unknown_topic_id
            elif writable is not None and name not in writable:
                code = ErrorCode.topic_authorization_failed
            elif topic is None or partition is None:
                code = ErrorCode.unknown_topic_or_partition
            elif acks not in (0, 1, -1):  # ReplicaManager.appendRecords: known partitions only
                code = ErrorCode.invalid_required_acks
            elif topic.internal:
                code, message = (
                    ErrorCode.invalid_topic_exception,
                    f"Cannot append to internal topic {topic.name}",
                )
            else:
                start = partition.log_start_offset
                records = validate_for_append(
                    data,
                    topic,
                    index,
                    produce_version=version,
                    now_ms=now,
                    transactions_enabled=verifier is not None,
                )
                if isinstance(records, Refused):
                    code, message, record_errors = (
                        records.code,
                        records.message,
                        records.record_errors,
                    )
                    if records.reason:
                        log.debug("%s-%d: %s", name, index, records.reason)
                else:
                    batch, h = records
                    verify = None
                    if h.attributes & ATTR_TRANSACTIONAL and verifier is not None:
                        tp, v = partition.tp, verifier
                        verify = _verify_with(v, txn_id or "", h.producer_id, h.producer_epoch, tp)
                        if tv2:  # the add first, outside the partition lock; verify is the guard
                            code = await add_for_produce(
                                broker.txns,
                                txn_id or "",
                                h.producer_id,
                                h.producer_epoch,
                                partition,
                                h.base_sequence,
                                now,
                            )
                    try:
                        appended = (
                            code
                            if code is not _NONE
                            else await partition.append(
                                batch, h, now, verify=verify, supports_epoch_bump=tv2
                            )
                        )
                    except StorageError as exc:
                        log.error("append to %s failed: %s", partition.tp, exc)
                        code, message = ErrorCode.kafka_storage_error, str(exc)
                    else:
                        if isinstance(appended, ErrorCode):
                            code = appended
                        else:
                            base, append_time = appended
                            produced(name, len(batch), h.records_count)
            if code is not _NONE:
                log.debug("produce to %s-%d refused: %s", name, index, code.name)
            parts.append(
                PartitionAnswer(index, code, base, append_time, start, record_errors, message)
            )
            unyielded += len(data)
            if unyielded >= YIELD_BYTES:  # a free partition lock is taken without a yield
                unyielded = 0
                await trio.lowlevel.checkpoint()
        results.append(
            TopicAnswer(None, t.topic_id, tuple(parts))
            if by_id
            else TopicAnswer(t.name, None, tuple(parts))
        )
    if acks == 0:
        failed = [
            (t.topic_id if t.name is None else t.name, p.partition, p.error_code.name)
            for t in results
            for p in t.partition_responses
            if p.error_code is not _NONE
        ]
        if failed:
            raise CloseConnection(f"acks=0 produce failed: {failed}")
        return NO_RESPONSE
    return ProduceAnswer(tuple(results))
