"""The group coordinator's async runtime: clock, timers, parked requests, the offsets topic.

Theory of operation
-------------------
Decisions are made by ``ClassicGroup`` (coordinator/group/classic.py) and ``OffsetsStore``
(coordinator/group/offsets.py); this module only feeds them the time, parks the requests they
park, and reads and writes ``__consumer_offsets``.

* Clock: ``trio.current_time()`` in milliseconds, so trio's MockClock drives every session,
  join, sync and initial-delay timer in tests. Record timestamps (commit time, state time) are
  wall-clock (``wall_ms``).
* Timers: one background task sleeps until the earliest group deadline or until a request
  changes some deadline (``_wake``), then lets each group expire what is due.
* Parked JoinGroup/SyncGroup: a request waits on a ``trio.Event`` for its (group, member,
  kind) key; the group's ``outbox`` answers are moved to a mailbox and the event set.
* Writes: every change is appended to the group's partition of ``__consumer_offsets``
  (``records.partition_for``) before it is applied and acknowledged; one lock keeps append +
  apply in log order. Offset records are applied through ``OffsetsStore.replay``, the same code
  that rebuilds the store at startup.
* ``__consumer_offsets`` is created on first write, or by a Metadata request that auto-creates
  it, whichever comes first (``TopicManager.create_internal``, with the spec registered here:
  ``offsets.topic.num.partitions`` partitions, ``cleanup.policy=compact``,
  ``segment.bytes=offsets.topic.segment.bytes``, as in Kafka, whose default is 1 MiB here):
  the log cleaner keeps the latest record per key and the active segment stays small, so the
  replay stays short. At startup it is replayed by the background task (runs of plain records
  applied as compaction would leave them, see ``offsets_log.replay_partition``); until that
  finishes, group APIs answer COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from coordinator.group.classic import (
    NEVER,
    ClassicGroup,
    GroupConfig,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from coordinator.group.offsets import CommitRequest, FetchedOffset, OffsetsStore, Record
from coordinator.group.offsets_log import OFFSETS_TOPIC, append_records, replay_partition
from coordinator.group.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    partition_for,
)
from coordinator.group.state import COMMIT, Act, GroupState
from storage.api import StorageError, TopicPartition
from storage.partition import Partition
from storage.topics import TopicManager
from wire.records import (
    Record as BatchRecord,
)
from wire.records import (
    build_batch,
    read_batch_header,
)

log = logging.getLogger("kafkad.group")

OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "1048576",  # offsets.topic.segment.bytes (Kafka: 100 MiB)
}
E = ErrorCode
# Verification answers as TxnOffsetCommit reports them: Kafka's group coordinator turns the
# retriable ones (NOT_ENOUGH_REPLICAS from its partition writer) into COORDINATOR_NOT_AVAILABLE,
# which clients answer by rediscovering the coordinator and retrying; a fenced producer gets
# INVALID_PRODUCER_EPOCH, which every client version knows. TRANSACTION_ABORTABLE is translated
# to INVALID_TXN_STATE below v4 by wire/errors.py.
TXN_COMMIT_VERIFY_ERRORS = {
    E.producer_fenced: E.invalid_producer_epoch,
    E.concurrent_transactions: E.coordinator_not_available,
    E.coordinator_load_in_progress: E.coordinator_not_available,
    E.not_coordinator: E.coordinator_not_available,
    E.network_exception: E.coordinator_not_available,
    E.not_enough_replicas: E.coordinator_not_available,
}


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    protocol_type: str
    state: GroupState


class GroupCoordinator:
    def __init__(
        self,
        topics: TopicManager,
        values: Mapping[str, Any],
        wall_ms: Callable[[], int],
    ) -> None:
        self.topics = topics
        self.num_partitions: int = values["offsets.topic.num.partitions"]
        self.topic_configs = {
            **OFFSETS_TOPIC_CONFIGS,
            "segment.bytes": str(values.get("offsets.topic.segment.bytes", 1048576)),
        }
        topics.register_internal(OFFSETS_TOPIC, self.num_partitions, self.topic_configs)
        self.config = GroupConfig(
            initial_rebalance_delay_ms=values["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=values["group.min.session.timeout.ms"],
            max_session_timeout_ms=values["group.max.session.timeout.ms"],
            max_size=values["group.max.size"],
        )
        self.wall_ms = wall_ms
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetsStore()
        self.loaded = trio.Event()
        self._wake = trio.Event()
        self._write_lock = trio.Lock()
        self._mailbox: dict[tuple[str, str, str], JoinResult | SyncResult] = {}
        self._events: dict[tuple[str, str, str], trio.Event] = {}
        self._closing = False

    @staticmethod
    def now_ms() -> int:
        return int(trio.current_time() * 1000)

    # -- background ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Load the offsets topic, then run the group timers until cancelled."""
        await self.load()
        while True:
            deadline = min((g.next_deadline() for g in self.groups.values()), default=NEVER)
            at = math.inf if deadline >= NEVER else (deadline + 1) / 1000
            with trio.move_on_at(at):
                await self._wake.wait()
            self._wake = trio.Event()
            now = self.now_ms()
            for g in list(self.groups.values()):
                if g.next_deadline() <= now:
                    removed = g.expire(now)
                    if removed:
                        log.info("group %s: session expired for %s", g.group_id, removed)
                    await self._after(g)

    async def load(self) -> None:
        topic = self.topics.get(OFFSETS_TOPIC)
        if topic is not None:
            for p in topic.partitions:
                await self._replay_partition(p)
            log.info("loaded %d group(s) from %s", len(self.groups), OFFSETS_TOPIC)
        self.loaded.set()

    async def _replay_partition(self, p: Partition) -> None:
        await replay_partition(
            p,
            self.replay,
            lambda producer_id, commit: self._complete_txn(p, producer_id, commit),
        )

    def replay(self, key: bytes, value: bytes | None, offset: int, producer_id: int = -1) -> None:
        """Apply one record of the offsets topic (at load, and live for offset records)."""
        try:
            k = decode_key(key)
            if isinstance(k, OffsetCommitKey):
                v = None if value is None else decode_offset_commit_value(value)
                if producer_id >= 0 and v is not None:
                    self.offsets.replay_pending(producer_id, k, v, offset)
                    return
                self.offsets.replay(k, v, offset)
                if v is not None and k.group not in self.groups:
                    self.groups[k.group] = ClassicGroup(k.group, self.config)
            elif isinstance(k, GroupMetadataKey):
                if value is None:
                    self.groups.pop(k.group, None)
                    self.offsets.forget_group(k.group)
                else:
                    gv = decode_group_metadata_value(value)
                    self.groups[k.group] = ClassicGroup.from_value(
                        k.group, gv, self.config, self.now_ms()
                    )
        except RecordFormatError as exc:
            log.warning("skipping unreadable %s record at %d: %s", OFFSETS_TOPIC, offset, exc)

    def _complete_txn(self, p: Partition, producer_id: int, commit: bool) -> None:
        """A marker of ``producer_id`` on offsets partition ``p``: complete the pending offsets
        of the groups stored there."""
        n = p.tp.partition
        topic = self.topics.get(OFFSETS_TOPIC)
        count = len(topic.partitions) if topic is not None else self.num_partitions
        for group in self.offsets.complete_txn(
            producer_id, commit, lambda g: partition_for(g, count) == n
        ):
            if group not in self.groups:
                self.groups[group] = ClassicGroup(group, self.config)

    async def write_txn_marker(
        self,
        p: Partition,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> int | ErrorCode:
        """Write a transaction marker on offsets partition ``p`` (in log order with the group
        writes) and materialise or drop the producer's pending offsets there (spec §5.5).
        Raises StorageError."""
        async with self._write_lock:
            written = await p.write_marker(
                producer_id, producer_epoch, commit, coordinator_epoch, self.wall_ms()
            )
            if not isinstance(written, ErrorCode):
                self._complete_txn(p, producer_id, commit)
        return written

    # -- the offsets topic --------------------------------------------------------------------

    async def _offsets_partition(self, group_id: str) -> Partition:
        topic = self.topics.get(OFFSETS_TOPIC)
        if topic is None:
            topic = await self.topics.create_internal(OFFSETS_TOPIC)
        return topic.partitions[partition_for(group_id, len(topic.partitions))]

    async def _append(self, group_id: str, records: list[Record]) -> int:
        """Append records as one batch to the group's partition; returns the base offset.
        Call with ``_write_lock`` held. Raises StorageError."""
        return await append_records(
            await self._offsets_partition(group_id), records, self.wall_ms()
        )

    async def _write_group(self, g: ClassicGroup, value_bytes: bytes | None = None) -> None:
        key = encode_group_metadata_key(GroupMetadataKey(g.group_id))
        if value_bytes is None:
            value_bytes = encode_group_metadata_value(g.to_value(self.wall_ms()))
        async with self._write_lock:
            await self._append(g.group_id, [(key, value_bytes)])

    # -- parked requests ------------------------------------------------------------------------

    async def _after(self, g: ClassicGroup) -> None:
        """Hand out the group's answers, write its record if asked, re-arm the timers."""
        outbox, g.outbox = g.outbox, []
        for member_id, result in outbox:
            kind = "join" if isinstance(result, JoinResult) else "sync"
            key = (g.group_id, member_id, kind)
            self._mailbox[key] = result
            if (ev := self._events.get(key)) is not None:
                ev.set()
        if g.persist_requested:
            g.persist_requested = False
            try:
                await self._write_group(g)
            except StorageError as exc:
                log.error("group %s: writing its metadata failed: %s", g.group_id, exc)
        self._wake.set()

    async def _await(self, key: tuple[str, str, str]) -> JoinResult | SyncResult:
        if key not in self._mailbox:
            ev = self._events[key] = trio.Event()
            try:
                await ev.wait()
            finally:
                if self._events.get(key) is ev:
                    del self._events[key]
        return self._mailbox.pop(key)

    def begin_shutdown(self) -> None:
        """Answer every parked request so connections can close."""
        self._closing = True
        for key, ev in list(self._events.items()):
            self._mailbox[key] = (
                JoinResult(E.not_coordinator, key[1])
                if key[2] == "join"
                else SyncResult(E.not_coordinator)
            )
            ev.set()

    def _status(self) -> ErrorCode:
        if self._closing:
            return E.not_coordinator
        if not self.loaded.is_set():
            return E.coordinator_load_in_progress
        return E.none

    # -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup -------------------------------------------

    async def join(self, group_id: str, req: JoinRequest) -> JoinResult:
        if (err := self._status()) is not E.none:
            return JoinResult(err, req.member_id)
        if not group_id:
            return JoinResult(E.invalid_group_id, req.member_id)
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            if req.member_id:
                return JoinResult(E.unknown_member_id, req.member_id)
            g = self.groups[group_id] = ClassicGroup(group_id, self.config)
        self._mailbox.pop((group_id, req.member_id, "join"), None)
        outcome = g.join(req, self.now_ms())
        log.debug("group %s: join %r -> %s (%s)", group_id, req.member_id, _brief(outcome), g.state)
        await self._after(g)
        if isinstance(outcome, JoinResult):
            return outcome
        result = await self._await((group_id, outcome[1], "join"))
        assert isinstance(result, JoinResult)
        log.debug("group %s: join of %s answered %s", group_id, outcome[1], _brief(result))
        return result

    async def sync(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
    ) -> SyncResult:
        if (err := self._status()) is not E.none:
            return SyncResult(err)
        if not group_id:
            return SyncResult(E.invalid_group_id)
        g = self.groups.get(group_id)
        if g is None:
            return SyncResult(E.unknown_member_id)
        key = (group_id, member_id, "sync")
        self._mailbox.pop(key, None)
        outcome = g.sync(
            member_id, instance_id, generation, protocol_type, protocol_name, self.now_ms()
        )
        log.debug(
            "group %s: sync %s gen %d -> %s (%s)",
            group_id,
            member_id,
            generation,
            _brief(outcome),
            g.state,
        )
        if outcome is Act.PERSIST_ASSIGNMENT:
            gen = g.generation
            value = encode_group_metadata_value(g.assignment_value(assignments, self.wall_ms()))
            try:
                await self._write_group(g, value)
            except StorageError as exc:
                log.error("group %s: writing the assignment failed: %s", group_id, exc)
                g.fail_assignment(gen, E.coordinator_not_available, self.now_ms())
            else:
                g.complete_assignment(gen, assignments, self.now_ms())
        await self._after(g)
        if isinstance(outcome, SyncResult):
            return outcome
        result = await self._await(key)
        assert isinstance(result, SyncResult)
        log.debug("group %s: sync of %s answered %s", group_id, member_id, _brief(result))
        return result

    async def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        if (err := self._status()) is not E.none:
            return err
        if not group_id:
            return E.invalid_group_id
        g = self.groups.get(group_id)
        if g is None:
            return E.unknown_member_id
        code = g.heartbeat(member_id, instance_id, generation, self.now_ms())
        log.debug("group %s: heartbeat %s gen %d -> %s", group_id, member_id, generation, code.name)
        await self._after(g)
        return code

    async def leave(
        self, group_id: str, members: Iterable[tuple[str, str | None]]
    ) -> ErrorCode | list[ErrorCode]:
        if (err := self._status()) is not E.none:
            return err
        if not group_id:
            return E.invalid_group_id
        g = self.groups.get(group_id)
        if g is None:
            return E.unknown_member_id
        codes = [g.leave(mid, iid, self.now_ms()) for mid, iid in members]
        log.debug("group %s: leave -> %s", group_id, [c.name for c in codes])
        await self._after(g)
        return codes

    # -- offsets -------------------------------------------------------------------------------

    def _check_commit(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            if generation >= 0:
                return E.group_id_not_found  # ILLEGAL_GENERATION below OffsetCommit v9
            self.groups[group_id] = ClassicGroup(group_id, self.config)  # a simple group
            return E.none
        if generation < 0 and g.state is GroupState.EMPTY:
            return E.none
        act = COMMIT[g.state]
        if isinstance(act, ErrorCode):
            return act
        if (err := g.validate_member(member_id, instance_id)) is not E.none:
            return err
        if generation != g.generation:
            return E.illegal_generation
        return E.none

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        commits: list[CommitRequest],
    ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        """OffsetCommit: a group-level error for every partition, or one code per partition."""
        if (err := self._status()) is not E.none:
            return err
        if not group_id:
            return E.invalid_group_id
        if (err := self._check_commit(group_id, member_id, instance_id, generation)) is not E.none:
            log.debug(
                "group %s: commit by %s gen %d -> %s", group_id, member_id, generation, err.name
            )
            return err
        results = {c.tp: OffsetsStore.validate(c) for c in commits}
        ok = [c for c in commits if results[c.tp] is E.none]
        if not ok:
            return results
        records = OffsetsStore.commit_records(group_id, ok, self.wall_ms())
        try:
            await self._append_and_replay(group_id, records)
        except StorageError as exc:
            log.error("group %s: offset commit failed: %s", group_id, exc)
            return E.coordinator_not_available
        return results

    async def txn_commit_offsets(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        instance_id: str | None,
        generation: int,
        commits: list[CommitRequest],
        verifier: Callable[[str, int, int, TopicPartition], ErrorCode] | None,
    ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit (spec §4.9): a group-level error, or one code per partition. The
        offsets are appended as one transactional batch (producer id/epoch, no sequence) and
        held as pending until the producer's marker lands on the group's partition."""
        if (err := self._status()) is not E.none:
            return err
        if not group_id:
            return E.invalid_group_id
        if verifier is None:
            return E.coordinator_not_available  # no transaction coordinator
        if (
            err := self._check_txn_commit(group_id, member_id, instance_id, generation)
        ) is not E.none:
            return err
        results = {c.tp: OffsetsStore.validate(c) for c in commits}
        ok = [c for c in commits if results[c.tp] is E.none]
        if not ok:
            return results
        records = OffsetsStore.commit_records(group_id, ok, self.wall_ms())
        try:
            async with self._write_lock:
                p = await self._offsets_partition(group_id)
                now = self.wall_ms()
                batch = build_batch(
                    [BatchRecord(i, 0, k, v) for i, (k, v) in enumerate(records)],
                    base_timestamp=now,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transactional=True,
                )
                appended = await p.append(
                    batch,
                    read_batch_header(batch),
                    now,
                    coordinator=True,
                    verify=lambda: verifier(transactional_id, producer_id, producer_epoch, p.tp),
                )
                if isinstance(appended, ErrorCode):
                    return TXN_COMMIT_VERIFY_ERRORS.get(appended, appended)
                for i, (k, v) in enumerate(records):
                    self.replay(k, v, appended[0] + i, producer_id)
        except StorageError as exc:
            log.error("group %s: transactional offset commit failed: %s", group_id, exc)
            return E.coordinator_not_available
        return results

    def _check_txn_commit(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        """KIP-447 fencing (Kafka's ClassicGroup.validateOffsetCommit, transactional): no
        REBALANCE_IN_PROGRESS, and requests without group metadata are not checked."""
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            if generation >= 0:
                return E.illegal_generation
            self.groups[group_id] = ClassicGroup(group_id, self.config)  # a simple group
            return E.none
        if generation < 0 and g.state is GroupState.EMPTY:
            return E.none
        if generation >= 0 or member_id or instance_id is not None:
            if (err := g.validate_member(member_id, instance_id)) is not E.none:
                return err
            if generation != g.generation:
                return E.illegal_generation
        return E.none

    async def _append_and_replay(self, group_id: str, records: list[Record]) -> None:
        async with self._write_lock:
            base = await self._append(group_id, records)
            for i, (k, v) in enumerate(records):
                self.replay(k, v, base + i)

    def fetch_offsets(
        self, group_id: str, tps: list[TopicPartition] | None, require_stable: bool
    ) -> tuple[ErrorCode, list[FetchedOffset]]:
        if (err := self._status()) is not E.none:
            return err, []
        return E.none, self.offsets.fetch(group_id, tps, require_stable)

    async def delete_offsets(
        self,
        group_id: str,
        tps: list[TopicPartition],
        subscribed: Callable[[ClassicGroup], set[str] | None],
    ) -> ErrorCode | dict[TopicPartition, ErrorCode]:
        """OffsetDelete. ``subscribed`` names the topics a non-empty group consumes (None: the
        group's protocol is not understood, so nothing may be deleted)."""
        if (err := self._status()) is not E.none:
            return err
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            return E.group_id_not_found
        topics: set[str] = set()
        if g.state is not GroupState.EMPTY:
            found = subscribed(g)
            if found is None:
                return E.non_empty_group
            topics = found
        results = {tp: E.group_subscribed_to_topic if tp.topic in topics else E.none for tp in tps}
        deletable = [tp for tp, code in results.items() if code is E.none]
        records = self.offsets.delete_records(group_id, deletable)
        if records:
            try:
                await self._append_and_replay(group_id, records)
            except StorageError:
                return E.coordinator_not_available
        return results

    # -- admin ---------------------------------------------------------------------------------

    def list_groups(self) -> list[GroupSummary] | ErrorCode:
        if (err := self._status()) is not E.none:
            return err
        return [
            GroupSummary(g.group_id, g.protocol_type or "", g.state)
            for g in self.groups.values()
            if g.state is not GroupState.DEAD
        ]

    def describe(self, group_id: str) -> ClassicGroup | ErrorCode | None:
        if (err := self._status()) is not E.none:
            return err
        return self.groups.get(group_id)

    async def delete_group(self, group_id: str) -> ErrorCode:
        if (err := self._status()) is not E.none:
            return err
        g = self.groups.get(group_id)
        if g is None or g.state is GroupState.DEAD:
            return E.group_id_not_found
        if g.state is not GroupState.EMPTY:
            return E.non_empty_group
        records = self.offsets.delete_records(group_id)
        records.append((encode_group_metadata_key(GroupMetadataKey(group_id)), None))
        try:
            await self._append_and_replay(group_id, records)
        except StorageError:
            return E.coordinator_not_available
        g.state = GroupState.DEAD
        return E.none


def _brief(outcome: object) -> str:
    """A short form of a join/sync decision for DEBUG logs."""
    if isinstance(outcome, JoinResult):
        return f"{outcome.error.name} gen {outcome.generation} leader {outcome.leader}"
    if isinstance(outcome, SyncResult):
        return outcome.error.name
    if isinstance(outcome, tuple):
        return f"{outcome[0].name} {outcome[1]}"
    return str(getattr(outcome, "name", outcome))
