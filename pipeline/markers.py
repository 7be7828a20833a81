"""The exactly-once sink's bookkeeping: transactional ids and micro-batch markers.

Each Spark task of the sink (one per partition of the data it writes) owns a transactional id,
`<prefix><query id>-<task partition>`, stable across restarts of the query from its checkpoint
(Spark keeps the query id there). In the same Kafka transaction as its rows it commits, with
`send_offsets_to_transaction`, a *marker*: in the consumer group of the same name, for
partition 0 of the marker topic, offset = the micro-batch id and metadata naming the query and
batch. Kafka makes the rows and the marker visible together or not at all, so the committed
marker says which micro-batch this task last wrote. A replayed micro-batch (same id, same input
after a crash) finds its own id there and skips; a task retry finds the same.

Why one group per task rather than one per sink: Kafka's TxnOffsetCommit refuses partitions
that do not exist (UNKNOWN_TOPIC_OR_PARTITION), so one group could hold only as many markers as
the marker topic has partitions, while Spark decides the number of tasks.

A marker also records the task's input as it was written: its row count and an order-free
digest of its rows (`InputDigest`). A replay that finds its own batch in the marker compares:
the same rows are skipped; other rows mean the query changed between runs of one checkpoint
or is not deterministic (a changed split of the `kafkad` source cannot cause it: a replay is
planned with the split kept in the batch's offsets, `pipeline.planning.SPLIT_KEY`), and the
task fails loudly rather than guess.

The driver, once every task of a micro-batch has committed, records the batch as complete in
the sink's own group (`done_group`, plain offset commit, offset = the batch id). A replay of a
complete batch is skipped by every task whatever its layout: this covers the driver dying
between the sink's commit and Spark's commit log, followed by a restart with another split.

Batch (non-streaming) writes use the same scheme with a fresh job id in place of the query id
and micro-batch 0: a task retried within one job does not write twice.

Pure: no Spark, no Kafka client.
"""

from __future__ import annotations

import enum
import hashlib
import re
from dataclasses import dataclass

MARKER_FORMAT = "kafkad-sink/2"
_META = re.compile(
    r"^kafkad-sink/(?P<version>[12]) query=(?P<query>\S+) batch=(?P<batch>\d+)"
    r"(?: rows=(?P<rows>\d+) digest=(?P<digest>[0-9a-f]{32}))?$"
)
_DIGEST_MOD = 2**128


class MarkerError(RuntimeError):
    """A marker group holds something this query did not write there."""


class Decision(enum.Enum):
    WRITE = "write the batch in a transaction with its marker"
    SKIP = "this task already committed this batch (a replay): write nothing"
    SKIP_DONE = "the driver recorded the whole batch as committed: write nothing"


class InputDigest:
    """Row count and an order-free digest (sum of per-row BLAKE2b, mod 2**128) of the rows a
    task writes: equal for the same multiset of rows whatever order a shuffle delivers them."""

    def __init__(self) -> None:
        self.rows = 0
        self._sum = 0

    def add(self, *fields: bytes | str | int | None) -> None:
        h = hashlib.blake2b(digest_size=16)
        for f in fields:
            if f is None:
                h.update(b"\x00")
                continue
            raw = f.encode() if isinstance(f, str) else str(f).encode() if isinstance(f, int) else f
            h.update(b"\x01%d:" % len(raw))
            h.update(raw)
        self._sum = (self._sum + int.from_bytes(h.digest(), "big")) % _DIGEST_MOD
        self.rows += 1

    @property
    def hex(self) -> str:
        return f"{self._sum:032x}"


@dataclass(frozen=True)
class Marker:
    batch: int
    rows: int | None  # None: a kafkad-sink/1 marker, which recorded no input
    digest: str | None


def transactional_id(prefix: str, query_id: str, task_partition: int) -> str:
    return f"{prefix}{query_id}-{task_partition}"


def marker_group(prefix: str, query_id: str, task_partition: int) -> str:
    """The group holding one task's marker (group ids and transactional ids are separate
    namespaces in Kafka, so it shares the transactional id's name)."""
    return transactional_id(prefix, query_id, task_partition)


def done_group(prefix: str, query_id: str) -> str:
    """The group in which the driver records the last micro-batch all of whose tasks
    committed (never a task's group: those end in the task partition number)."""
    return f"{prefix}{query_id}-done"


def encode(query_id: str, batch_id: int, digest: InputDigest | None = None) -> tuple[int, str]:
    """The marker for a micro-batch: (offset to commit, metadata). Without a digest: the
    driver's batch-complete record."""
    if batch_id < 0:
        raise ValueError(f"micro-batch id {batch_id}")
    meta = f"{MARKER_FORMAT} query={query_id} batch={batch_id}"
    if digest is not None:
        meta += f" rows={digest.rows} digest={digest.hex}"
    return batch_id, meta


def decode(offset: int, metadata: str | None, query_id: str) -> Marker | None:
    """The committed marker, None when the group has none (Kafka answers offset -1). A marker
    of another query or format is an error: two queries or sinks would be sharing a
    transactional id prefix."""
    if offset < 0:
        return None
    match = _META.match(metadata or "")
    if match is None or int(match["batch"]) != offset:
        raise MarkerError(f"marker offset {offset} metadata {metadata!r} is not the sink's")
    if match["query"] != query_id:
        raise MarkerError(
            f"marker of query {match['query']}, not {query_id}: use another transactionalIdPrefix"
        )
    rows = match["rows"]
    return Marker(offset, None if rows is None else int(rows), match["digest"])


def decide(done: Marker | None, own: Marker | None, batch_id: int) -> Decision:
    """Micro-batches are numbered from 0 and each commits before the next is planned, so a
    marker at or past this batch means it was written before."""
    if done is not None and done.batch >= batch_id:
        return Decision.SKIP_DONE
    if own is not None and own.batch >= batch_id:
        return Decision.SKIP
    return Decision.WRITE


def check_replay(own: Marker, batch_id: int, digest: InputDigest) -> None:
    """A task skipping its own committed batch must be replaying the same rows."""
    if own.batch != batch_id or own.rows is None:
        return  # a later batch (this one was planned before it), or a v1 marker: no record
    if (own.rows, own.digest) != (digest.rows, digest.hex):
        raise MarkerError(
            f"micro-batch {batch_id} is replayed with other input for this task than it"
            f" committed ({digest.rows} rows now, {own.rows} then): the query changed between"
            " runs of one checkpoint, its input is split differently, it is not"
            " deterministic, or (failOnDataLoss=false) retention deleted input records since;"
            " writing it would duplicate or lose rows. Restore the query of the run that wrote"
            " it, or use a new checkpoint"
        )
