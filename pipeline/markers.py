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

Batch (non-streaming) writes use the same scheme with a fresh job id in place of the query id
and micro-batch 0: a task retried within one job does not write twice.

Pure: no Spark, no Kafka client.
"""

from __future__ import annotations

import enum
import re

MARKER_FORMAT = "kafkad-sink/1"
_META = re.compile(rf"^{re.escape(MARKER_FORMAT)} query=(?P<query>\S+) batch=(?P<batch>\d+)$")


class MarkerError(RuntimeError):
    """A marker group holds something this query did not write there."""


class Decision(enum.Enum):
    WRITE = "write the batch in a transaction with its marker"
    SKIP = "this task already committed this batch (a replay): write nothing"


def transactional_id(prefix: str, query_id: str, task_partition: int) -> str:
    return f"{prefix}{query_id}-{task_partition}"


def marker_group(prefix: str, query_id: str, task_partition: int) -> str:
    """The group holding one task's marker (group ids and transactional ids are separate
    namespaces in Kafka, so it shares the transactional id's name)."""
    return transactional_id(prefix, query_id, task_partition)


def encode(query_id: str, batch_id: int) -> tuple[int, str]:
    """The marker for a micro-batch: (offset to commit, metadata)."""
    if batch_id < 0:
        raise ValueError(f"micro-batch id {batch_id}")
    return batch_id, f"{MARKER_FORMAT} query={query_id} batch={batch_id}"


def decode(offset: int, metadata: str | None, query_id: str) -> int | None:
    """The micro-batch a committed marker records, None when the group has none (Kafka answers
    offset -1). A marker of another query or format is an error: two queries or sinks would be
    sharing a transactional id prefix."""
    if offset < 0:
        return None
    match = _META.match(metadata or "")
    if match is None or int(match["batch"]) != offset:
        raise MarkerError(f"marker offset {offset} metadata {metadata!r} is not the sink's")
    if match["query"] != query_id:
        raise MarkerError(
            f"marker of query {match['query']}, not {query_id}: use another transactionalIdPrefix"
        )
    return offset


def decide(committed_batch: int | None, batch_id: int) -> Decision:
    """Micro-batches are numbered from 0 and each commits before the next is planned, so a
    marker at or past this batch means it was written before."""
    if committed_batch is not None and committed_batch >= batch_id:
        return Decision.SKIP
    return Decision.WRITE
