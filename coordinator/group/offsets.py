"""Committed offsets: the in-memory view of the offset records of ``__consumer_offsets``.

Theory of operation
-------------------
The store owns, per group, the committed ``OffsetAndMetadata`` of each partition. It never
writes anything itself: ``commit_records`` / ``delete_records`` turn a request into the
(key, value) records to append, the runtime appends them to the group's offsets partition, and
only then calls ``replay`` on each record with the log offset it landed at. Startup replays the
whole offsets topic through the same ``replay``, so the state after a restart is the state
before it (a replay-equals-live test checks this).

A value of None is a tombstone: the partition's offset is gone. Each committed entry keeps the
log offset of the record that made it (``record_offset``), which the transactional path needs.

Transactions (issue 5, spec §4.9, §5.5, §5.6), hooks only:
* ``pending[producer_id][group][tp]`` holds offsets written by TxnOffsetCommit (transactional
  batches) until the producer's marker lands on the offsets partition; ``replay_pending``
  records them, ``complete_txn(producer_id, commit)`` materialises (only where the pending
  record is newer than the committed one: a later plain commit wins) or drops them.
* ``fetch(..., require_stable=True)`` answers UNSTABLE_OFFSET_COMMIT for partitions with
  pending offsets; offset tombstones (OffsetDelete, DeleteGroups) drop matching pending
  entries; a group's own tombstone leaves its offsets alone.
TxnOffsetCommit (``GroupCoordinator.txn_commit_offsets``) and the markers the transaction
coordinator writes through ``Broker.write_txn_marker`` drive them live; the replay of the
offsets topic drives them at load (transactional batches -> pending, markers -> complete).

Offsets retention (``offsets.retention.minutes``): ``expired_records`` decides, the runtime runs
it every ``offsets.retention.check.interval.ms`` (coordinator/group/offsets_api.py). Deliberate
difference from Kafka: an Empty group with pending transactional offsets and no committed ones
is kept until its transaction ends (Kafka deletes it and lets the marker recreate offsets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from coordinator.group.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from storage.api import TopicPartition

OFFSET_METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes default


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    record_offset: int = -1  # where the record that set it sits in the offsets partition


@dataclass(frozen=True, slots=True)
class CommitRequest:
    tp: TopicPartition
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    tp: TopicPartition
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode


Record = tuple[bytes, bytes | None]


@dataclass
class OffsetsStore:
    committed: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    # producer id -> group -> tp -> pending offsets (TxnOffsetCommit, issue 5)
    pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = field(
        default_factory=dict
    )

    # -- decisions: records to append ------------------------------------------------------

    @staticmethod
    def validate(c: CommitRequest) -> ErrorCode:
        if c.metadata is not None and len(c.metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
            return ErrorCode.offset_metadata_too_large
        return ErrorCode.none

    @staticmethod
    def commit_records(group: str, commits: Iterable[CommitRequest], now_ms: int) -> list[Record]:
        return [
            (
                encode_offset_commit_key(OffsetCommitKey(group, c.tp.topic, c.tp.partition)),
                encode_offset_commit_value(
                    OffsetCommitValue(c.offset, c.leader_epoch, c.metadata or "", now_ms)
                ),
            )
            for c in commits
        ]

    def delete_records(
        self, group: str, tps: Iterable[TopicPartition] | None = None
    ) -> list[Record]:
        """Tombstones for the given partitions (OffsetDelete), or, with None, for every
        partition of the group (Kafka's ``deleteAllOffsets``): each that has a committed
        offset or a pending transactional one. The latter matter: a tombstone drops the
        pending offsets when replayed, so a later COMMIT marker materialises nothing, live and
        after the cleaner removed the group's own tombstone (issue 21)."""
        have = set(self.committed.get(group, {}))
        for by_group in self.pending.values():
            have.update(by_group.get(group, {}))
        chosen = have if tps is None else {tp for tp in tps if tp in have}
        return [
            (encode_offset_commit_key(OffsetCommitKey(group, tp.topic, tp.partition)), None)
            for tp in sorted(chosen)
        ]

    def topic_deleted_records(self, topic: str) -> dict[str, list[Record]]:
        """Per group, tombstones for every partition of ``topic`` it has committed or pending
        offsets for (Kafka's ``onPartitionsDeleted``): a topic created again under the name
        starts with no committed offsets."""
        tps: dict[str, set[TopicPartition]] = {}
        for source in (self.committed, *self.pending.values()):
            for group, offsets in source.items():
                for tp in offsets:
                    if tp.topic == topic:
                        tps.setdefault(group, set()).add(tp)
        return {
            group: [
                (encode_offset_commit_key(OffsetCommitKey(group, tp.topic, tp.partition)), None)
                for tp in sorted(chosen)
            ]
            for group, chosen in tps.items()
        }

    def expired_records(
        self,
        group: str,
        base_ms: Callable[[OffsetAndMetadata], int],
        subscribed: set[str],
        now_ms: int,
        retention_ms: int,
    ) -> tuple[list[Record], bool]:
        """Offsets retention for one group (Kafka's ``cleanupExpiredOffsets``): tombstones for
        the offsets of topics the group does not subscribe to whose ``base_ms`` is at least
        ``retention_ms`` old and that have no pending transactional offset; and whether the
        group is left with no offsets at all (then an Empty group may be deleted)."""
        records: list[Record] = []
        all_gone = True
        for tp, om in sorted(self.committed.get(group, {}).items()):
            if tp.topic in subscribed:
                all_gone = False
            elif now_ms - base_ms(om) >= retention_ms and not self.has_pending(group, tp):
                key = OffsetCommitKey(group, tp.topic, tp.partition)
                records.append((encode_offset_commit_key(key), None))
            else:
                all_gone = False
        pending = any(by_group.get(group) for by_group in self.pending.values())
        return records, all_gone and not pending

    # -- applying records (live and at load) ------------------------------------------------

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None, offset: int) -> None:
        tp = TopicPartition(key.topic, key.partition)
        if value is None:
            group = self.committed.get(key.group)
            if group is not None:
                group.pop(tp, None)
                if not group:
                    del self.committed[key.group]
            for producer_id, by_group in list(self.pending.items()):
                pending = by_group.get(key.group)
                if pending is not None:
                    pending.pop(tp, None)
                    if not pending:  # the group has no pending offsets left (Kafka's remove)
                        del by_group[key.group]
                if not by_group:
                    del self.pending[producer_id]
            return
        self.committed.setdefault(key.group, {})[tp] = OffsetAndMetadata(
            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, offset
        )

    def replay_pending(
        self, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue, offset: int
    ) -> None:
        """A transactional offset record (issue 5): held until the producer's marker."""
        tp = TopicPartition(key.topic, key.partition)
        self.pending.setdefault(producer_id, {}).setdefault(key.group, {})[tp] = OffsetAndMetadata(
            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, offset
        )

    def complete_txn(
        self, producer_id: int, commit: bool, on_partition: Callable[[str], bool] | None = None
    ) -> list[str]:
        """The producer's marker landed on an offsets partition (spec §5.5): only the groups
        stored there (``on_partition(group)``; all if None) are completed. Returns the groups
        whose offsets were materialised."""
        by_group = self.pending.get(producer_id, {})
        done = {g: o for g, o in by_group.items() if on_partition is None or on_partition(g)}
        for g in done:
            del by_group[g]
        if not by_group:
            self.pending.pop(producer_id, None)
        if not commit:
            return []
        for group, offsets in done.items():
            have = self.committed.setdefault(group, {})
            for tp, om in offsets.items():
                current = have.get(tp)
                if current is None or current.record_offset < om.record_offset:
                    have[tp] = om
        return list(done)

    # -- reads ------------------------------------------------------------------------------

    def has_offsets(self, group: str) -> bool:
        return bool(self.committed.get(group))

    def has_pending(self, group: str, tp: TopicPartition) -> bool:
        return any(tp in by_group.get(group, {}) for by_group in self.pending.values())

    def fetch(
        self, group: str, tps: Iterable[TopicPartition] | None, require_stable: bool = False
    ) -> list[FetchedOffset]:
        """Offsets of the listed partitions (-1 where none), or every committed one (None)."""
        have = self.committed.get(group, {})
        chosen = sorted(have) if tps is None else list(tps)
        out = []
        for tp in chosen:
            if require_stable and self.has_pending(group, tp):
                out.append(FetchedOffset(tp, -1, -1, "", ErrorCode.unstable_offset_commit))
                continue
            om = have.get(tp)
            if om is None:
                out.append(FetchedOffset(tp, -1, -1, "", ErrorCode.none))
            else:
                out.append(
                    FetchedOffset(tp, om.offset, om.leader_epoch, om.metadata, ErrorCode.none)
                )
        return out
