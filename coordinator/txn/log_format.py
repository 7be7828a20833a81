"""``__transaction_state`` records in Kafka's own format.

Theory of operation
-------------------
The coordinator persists one record per transit (``metadata.TxnTransit``): key = the
transactional id, value = the whole target metadata, or no value (a tombstone) when an id
expires. The log is compacted by key, so the latest record per id is the id's state; replaying
the records in offset order through ``TxnCache.apply`` rebuilds the cache.

Both halves are version-prefixed (int16) structs as Kafka's generated code writes them
(``MessageUtil.toVersionPrefixedBytes``), from the JSON schemas ``TransactionLogKey`` and
``TransactionLogValue``:

key v0 (never flexible)::

    int16 version=0 | string TransactionalId (int16 length + UTF-8)

value v0 (Kafka writes it while ``transaction.version`` is 0)::

    int16 version=0 | int64 ProducerId | int16 ProducerEpoch | int32 TransactionTimeoutMs
    | int8 TransactionStatus | nullable array TransactionPartitions (int32 count, -1 = null;
      each: string Topic, array of int32 PartitionIds)
    | int64 TransactionLastUpdateTimestampMs | int64 TransactionStartTimestampMs

value v1 (flexible; written when ``transaction.version`` >= 1): the same fields with compact
arrays/strings (unsigned varint length + 1, 0 = null), an empty tagged-field section after each
partition entry, and a final tagged-field section holding, only when not at their defaults,
tag 0 PreviousProducerId (int64, default -1), tag 1 NextProducerId (int64, default -1) and tag 2
ClientTransactionVersion (int16, default 0). Unknown tags are skipped when reading.

``TransactionPartitions`` is null for Empty (Kafka refuses to write Empty with partitions and
ignores them when reading) and lists topics in sorted order here (Kafka groups by a hash map, in
no particular order). ``last_producer_epoch`` is not in the schema; a decoded record has -1.

Deliberate difference: we write v1 by default (``VALUE_VERSION``) although we do not advertise
``transaction.version``, because v1 keeps PreviousProducerId, which the KIP-360 retry after a
producer-id rotation needs after a restart. Both versions are read.

An id's ``__transaction_state`` partition is ``coordinator.placement.partition_for`` (one
implementation of Kafka's ``Utils.abs(key.hashCode()) % n`` for both coordinators).
"""

from __future__ import annotations

import struct
from typing import Final

from coordinator.txn.metadata import TP, TxnTransit
from coordinator.txn.state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnState
from wire.errors import DecodeError
from wire.headers import read_uvarint, write_uvarint

__all__ = [
    "KEY_VERSION",
    "VALUE_VERSION",
    "LogFormatError",
    "UnknownKeyVersion",
    "decode",
    "decode_key",
    "encode",
    "encode_key",
    "encode_value",
]

KEY_VERSION: Final = 0
VALUE_VERSION: Final = 1  # the version we write; 0 and 1 are read
_VALUE_VERSIONS: Final = (0, 1)
_TAG_PREV_PRODUCER_ID: Final = 0
_TAG_NEXT_PRODUCER_ID: Final = 1
_TAG_CLIENT_TXN_VERSION: Final = 2

_HEAD = struct.Struct(">qhib")  # ProducerId, ProducerEpoch, TransactionTimeoutMs, Status
_TIMES = struct.Struct(">qq")  # LastUpdateTimestampMs, StartTimestampMs
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class LogFormatError(ValueError):
    """A record that does not decode (corrupt, or a version we do not know)."""


class UnknownKeyVersion(LogFormatError):
    """Kafka skips such records while loading ("a left over from an aborted upgrade")."""


# -- encoding ------------------------------------------------------------------------------


def encode(transit: TxnTransit, value_version: int = VALUE_VERSION) -> tuple[bytes, bytes | None]:
    """The (key, value) of the record for ``transit``; value None for a tombstone (Dead)."""
    key = encode_key(transit.transactional_id)
    return key, None if transit.is_tombstone else encode_value(transit, value_version)


def encode_key(transactional_id: str) -> bytes:
    tid = transactional_id.encode()
    return _I16.pack(KEY_VERSION) + _I16.pack(len(tid)) + tid


def encode_value(transit: TxnTransit, version: int = VALUE_VERSION) -> bytes:
    state = transit.state
    if state in _NEVER_VALUES:
        raise LogFormatError(f"{state.name} is never written as a value")
    if state is TxnState.EMPTY and transit.partitions:
        raise LogFormatError("Empty with partitions")
    if version == 1:
        return _encode_value_v1(transit, state)
    if version not in _VALUE_VERSIONS:
        raise LogFormatError(f"value version {version}")
    return _encode_value(transit, version)


# The v1 value every transit writes, in as few steps as its tiny fixed layout allows: one pack
# for the head, the partitions (usually one topic, one partition) and, in the usual tag
# section (PreviousProducerId alone), one pack for the tail. ``_encode_value`` is the field by
# field reference (and the v0 writer); tests check both give the same bytes.
_V1_HEAD = struct.Struct(">hqhib")  # version 1, ProducerId, Epoch, TimeoutMs, Status
_V1_ONE_PARTITION = struct.Struct(">Bi")  # compact array of 1 partition id, then the id
_V1_TAIL_PREV = struct.Struct(">qqBBBq")  # times, 1 tag: tag 0, size 8, PreviousProducerId
_V1_TAIL_NO_TAGS = struct.Struct(">qqB")  # times, no tags
_NEVER_VALUES: Final = frozenset({TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE})


def _uvarint(n: int) -> bytes:
    return _ONE_BYTE[n] if n < 0x80 else write_uvarint(n)


_ONE_BYTE: Final = tuple(bytes((i,)) for i in range(0x80))


def _encode_value_v1(transit: TxnTransit, state: TxnState) -> bytes:
    out = [
        _V1_HEAD.pack(1, transit.producer_id, transit.producer_epoch, transit.txn_timeout_ms, state)
    ]
    partitions = transit.partitions
    if state is TxnState.EMPTY:
        out.append(b"\0")  # null array
    elif len(partitions) == 1:
        ((topic, partition),) = partitions
        name = topic.encode()
        out += (b"\2", _uvarint(len(name) + 1), name, _V1_ONE_PARTITION.pack(2, partition), b"\0")
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)
        out.append(_uvarint(len(by_topic) + 1))
        for topic, ids in by_topic.items():
            name = topic.encode()
            out += (_uvarint(len(name) + 1), name, _uvarint(len(ids) + 1))
            out.append(struct.pack(f">{len(ids)}i", *ids))
            out.append(b"\0")  # no tagged fields in the entry
    prev = transit.prev_producer_id
    if transit.next_producer_id == NO_PRODUCER_ID and transit.client_transaction_version == 0:
        if prev != NO_PRODUCER_ID:
            out.append(
                _V1_TAIL_PREV.pack(
                    transit.txn_last_update_timestamp,
                    transit.txn_start_timestamp,
                    1,
                    _TAG_PREV_PRODUCER_ID,
                    8,
                    prev,
                )
            )
        else:
            out.append(
                _V1_TAIL_NO_TAGS.pack(
                    transit.txn_last_update_timestamp, transit.txn_start_timestamp, 0
                )
            )
    else:
        out.append(_TIMES.pack(transit.txn_last_update_timestamp, transit.txn_start_timestamp))
        out.append(_tags(transit))
    return b"".join(out)


def _tags(transit: TxnTransit) -> bytes:
    """v1's final tagged-field section: each tag only when not at its default."""
    tags: list[tuple[int, bytes]] = []
    if transit.prev_producer_id != NO_PRODUCER_ID:
        tags.append((_TAG_PREV_PRODUCER_ID, _I64.pack(transit.prev_producer_id)))
    if transit.next_producer_id != NO_PRODUCER_ID:
        tags.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(transit.next_producer_id)))
    if transit.client_transaction_version != 0:
        tags.append((_TAG_CLIENT_TXN_VERSION, _I16.pack(transit.client_transaction_version)))
    out = bytearray(write_uvarint(len(tags)))
    for tag, data in tags:
        out += write_uvarint(tag) + write_uvarint(len(data)) + data
    return bytes(out)


def _encode_value(transit: TxnTransit, version: int) -> bytes:
    """The value field by field, either version (the reference for ``_encode_value_v1``)."""
    state = transit.state
    flexible = version >= 1
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(transit.partitions):
        by_topic.setdefault(topic, []).append(partition)

    out = bytearray(_I16.pack(version))
    out += _HEAD.pack(
        transit.producer_id, transit.producer_epoch, transit.txn_timeout_ms, int(state)
    )
    if state is TxnState.EMPTY:
        out += write_uvarint(0) if flexible else _I32.pack(-1)  # null array
    else:
        out += write_uvarint(len(by_topic) + 1) if flexible else _I32.pack(len(by_topic))
        for topic, partitions in by_topic.items():
            name = topic.encode()
            out += write_uvarint(len(name) + 1) if flexible else _I16.pack(len(name))
            out += name
            out += write_uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
            out += b"".join(_I32.pack(p) for p in partitions)
            if flexible:
                out += write_uvarint(0)  # no tagged fields in the entry
    out += _TIMES.pack(transit.txn_last_update_timestamp, transit.txn_start_timestamp)
    if flexible:
        out += _tags(transit)
    return bytes(out)


# -- decoding ------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self._pos + n > len(self._data):
            raise LogFormatError("record ends early")
        view = self._data[self._pos : self._pos + n]
        self._pos += n
        return view

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        return fmt.unpack(self.take(fmt.size))

    def uvarint(self) -> int:
        try:
            value, self._pos = read_uvarint(self._data, self._pos, len(self._data))
        except DecodeError as exc:
            raise LogFormatError(str(exc)) from exc
        return value

    def string(self, flexible: bool) -> str:
        n = self.uvarint() - 1 if flexible else self.unpack(_I16)[0]
        if n < 0:
            raise LogFormatError("null string")
        try:
            return str(self.take(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise LogFormatError("string is not UTF-8") from exc

    def array_length(self, flexible: bool) -> int:
        """Element count, -1 for null."""
        return self.uvarint() - 1 if flexible else self.unpack(_I32)[0]

    def end(self) -> None:
        if self._pos != len(self._data):
            raise LogFormatError(f"{len(self._data) - self._pos} bytes after the record")


def decode_key(key: bytes) -> str:
    r = _Reader(key)
    (version,) = r.unpack(_I16)
    if version != KEY_VERSION:
        raise UnknownKeyVersion(f"key version {version}")
    tid = r.string(flexible=False)
    r.end()
    return tid


def decode(key: bytes, value: bytes | None) -> TxnTransit:
    """The transit a record describes; a tombstone decodes to a Dead transit."""
    tid = decode_key(key)
    if value is None:
        return TxnTransit(
            tid, NO_PRODUCER_ID, NO_PRODUCER_ID, NO_PRODUCER_ID, NO_PRODUCER_EPOCH,
            NO_PRODUCER_EPOCH, 0, TxnState.DEAD, frozenset(), -1, -1,
        )  # fmt: skip
    r = _Reader(value)
    (version,) = r.unpack(_I16)
    if version not in _VALUE_VERSIONS:
        raise LogFormatError(f"value version {version}")
    flexible = version >= 1
    producer_id, epoch, timeout_ms, status = r.unpack(_HEAD)
    try:
        state = TxnState(status)
    except ValueError as exc:
        raise LogFormatError(f"transaction status {status}") from exc
    partitions: set[TP] = set()
    for _ in range(max(r.array_length(flexible), 0)):
        topic = r.string(flexible)
        count = r.array_length(flexible)
        if count < 0:
            raise LogFormatError("null partition list")
        partitions.update((topic, p) for (p,) in struct.iter_unpack(">i", r.take(4 * count)))
        if flexible:
            _skip_tags(r)
    last_update, start = r.unpack(_TIMES)
    prev_id, next_id, client_tv = NO_PRODUCER_ID, NO_PRODUCER_ID, 0
    if flexible:
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            data = r.take(size)
            try:
                if tag == _TAG_PREV_PRODUCER_ID:
                    (prev_id,) = _I64.unpack(data)
                elif tag == _TAG_NEXT_PRODUCER_ID:
                    (next_id,) = _I64.unpack(data)
                elif tag == _TAG_CLIENT_TXN_VERSION:
                    (client_tv,) = _I16.unpack(data)
            except struct.error as exc:
                raise LogFormatError(f"tag {tag} has {size} bytes") from exc
    r.end()
    if state is TxnState.EMPTY:
        partitions.clear()  # Kafka ignores them for Empty
    return TxnTransit(
        tid, producer_id, prev_id, next_id, epoch, NO_PRODUCER_EPOCH, timeout_ms, state,
        frozenset(partitions), start, last_update, client_tv,
    )  # fmt: skip


def _skip_tags(r: _Reader) -> None:
    for _ in range(r.uvarint()):
        r.uvarint()
        r.take(r.uvarint())
