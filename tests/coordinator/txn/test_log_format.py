"""``__transaction_state`` records: golden bytes written by hand from Kafka's JSON schemas
(TransactionLogKey v0, TransactionLogValue v0/v1), round trips, placement."""

from __future__ import annotations

import ctypes
import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.placement import java_string_hash, partition_for
from coordinator.txn import log_format
from coordinator.txn.log_format import (
    LogFormatError,
    UnknownKeyVersion,
    decode,
    encode,
)
from coordinator.txn.metadata import TxnTransit
from coordinator.txn.state import TxnState

S = TxnState
LAST_UPDATE = "00 00 01 8b cf e5 69 f4"  # 1_700_000_000_500
START = "00 00 01 8b cf e5 68 00"  # 1_700_000_000_000


def transit(state: TxnState = S.ONGOING, **kw: object) -> TxnTransit:
    fields: dict[str, object] = {
        "transactional_id": "my-txn",
        "producer_id": 1000,
        "prev_producer_id": 999,
        "next_producer_id": -1,
        "producer_epoch": 3,
        "last_producer_epoch": -1,
        "txn_timeout_ms": 60_000,
        "state": state,
        "partitions": frozenset({("b", 2), ("a", 1), ("a", 0)}),
        "txn_start_timestamp": 1_700_000_000_000,
        "txn_last_update_timestamp": 1_700_000_000_500,
    }
    fields.update(kw)
    return TxnTransit(**fields)  # type: ignore[arg-type]


def hx(s: str) -> bytes:
    return bytes.fromhex(s.replace("|", " "))


KEY = hx("00 00 | 00 06 | 6d 79 2d 74 78 6e")  # version 0, string "my-txn"

HEAD = "00 00 00 00 00 00 03 e8 | 00 03 | 00 00 ea 60"  # pid 1000, epoch 3, timeout 60000

GOLDEN_V1_ONGOING = hx(
    "00 01"  # value version 1
    f"| {HEAD} | 01"  # ..., status Ongoing
    "| 03"  # compact array: 2 topics
    "| 02 61 | 03 00 00 00 00 00 00 00 01 | 00"  # "a", [0, 1], no tags
    "| 02 62 | 02 00 00 00 02 | 00"  # "b", [2], no tags
    f"| {LAST_UPDATE} | {START}"
    "| 01 | 00 08 00 00 00 00 00 00 03 e7"  # 1 tagged field: tag 0 PreviousProducerId = 999
)

GOLDEN_V0_ONGOING = hx(
    "00 00"  # value version 0
    f"| {HEAD} | 01"
    "| 00 00 00 02"  # array: 2 topics
    "| 00 01 61 | 00 00 00 02 | 00 00 00 00 | 00 00 00 01"  # "a", [0, 1]
    "| 00 01 62 | 00 00 00 01 | 00 00 00 02"  # "b", [2]
    f"| {LAST_UPDATE} | {START}"
)


def test_key_golden() -> None:
    assert log_format.encode_key("my-txn") == KEY
    assert log_format.decode_key(KEY) == "my-txn"


def test_value_v1_golden() -> None:
    key, value = encode(transit(), value_version=1)
    assert (key, value) == (KEY, GOLDEN_V1_ONGOING)


def test_value_v0_golden() -> None:
    assert encode(transit(), value_version=0) == (KEY, GOLDEN_V0_ONGOING)


def test_empty_writes_null_partitions_and_all_tags() -> None:
    t = transit(
        S.EMPTY,
        partitions=frozenset(),
        txn_start_timestamp=-1,
        next_producer_id=77,
        client_transaction_version=2,
    )
    tail = (
        f"{LAST_UPDATE} | ff ff ff ff ff ff ff ff"  # start -1
        "| 03 | 00 08 00 00 00 00 00 00 03 e7"  # tag 0 prev 999
        "| 01 08 00 00 00 00 00 00 00 4d"  # tag 1 next 77
        "| 02 02 00 02"  # tag 2 client version 2
    )
    assert encode(t, 1)[1] == hx(f"00 01 | {HEAD} | 00 | 00 | {tail}")  # status 0, null array
    assert encode(t, 0)[1] == hx(
        f"00 00 | {HEAD} | 00 | ff ff ff ff | {LAST_UPDATE} | ff ff ff ff ff ff ff ff"
    )


def test_default_tags_are_not_written() -> None:
    t = transit(S.COMPLETE_COMMIT, partitions=frozenset(), prev_producer_id=-1)
    value = encode(t, 1)[1]
    assert value is not None
    assert value.endswith(hx(f"01 | {LAST_UPDATE} | {START} | 00"))  # empty array, no tags


def test_tombstone() -> None:
    key, value = encode(transit(S.DEAD, partitions=frozenset()))
    assert (key, value) == (KEY, None)
    dead = decode(key, None)
    assert dead.is_tombstone and dead.transactional_id == "my-txn"


def test_decode_goldens() -> None:
    t = transit()
    assert decode(KEY, GOLDEN_V1_ONGOING) == t
    # v0 has no PreviousProducerId: it reads back as -1
    assert decode(KEY, GOLDEN_V0_ONGOING) == transit(prev_producer_id=-1)


def test_decode_skips_unknown_tags_and_ignores_partitions_of_empty() -> None:
    unknown_tag = hx("05 03 aa bb cc")
    value = GOLDEN_V1_ONGOING[:-11] + hx("02 00 08 00 00 00 00 00 00 03 e7") + unknown_tag
    assert decode(KEY, value) == transit()
    empty = bytearray(GOLDEN_V0_ONGOING)
    empty[16] = 0  # status byte -> Empty, partitions still listed
    assert decode(KEY, bytes(empty)).partitions == frozenset()


@pytest.mark.parametrize(
    "key, value",
    [
        (hx("00 01 00 01 61"), None),
        (KEY, hx("00 02") + GOLDEN_V1_ONGOING[2:]),  # unknown value version
        (KEY, GOLDEN_V1_ONGOING[:-1]),  # truncated
        (KEY, GOLDEN_V1_ONGOING + b"\0"),  # trailing bytes
        (KEY, GOLDEN_V0_ONGOING[:16] + b"\x09" + GOLDEN_V0_ONGOING[17:]),  # status 9
    ],
)
def test_bad_records(key: bytes, value: bytes | None) -> None:
    with pytest.raises(LogFormatError):
        decode(key, value)


def test_unknown_key_version_is_its_own_error() -> None:
    with pytest.raises(UnknownKeyVersion):
        decode(hx("00 01 00 01 61"), None)


@pytest.mark.parametrize("state", [S.DEAD, S.PREPARE_EPOCH_FENCE])
def test_never_written_states(state: TxnState) -> None:
    with pytest.raises(LogFormatError):
        log_format.encode_value(transit(state))


def test_empty_with_partitions_is_refused() -> None:
    with pytest.raises(LogFormatError):
        log_format.encode_value(transit(S.EMPTY))


int64 = st.integers(-(2**63), 2**63 - 1)
persisted = st.builds(
    TxnTransit,
    transactional_id=st.text(min_size=1, max_size=20),
    producer_id=int64,
    prev_producer_id=int64,
    next_producer_id=int64,
    producer_epoch=st.integers(-1, 32767),
    last_producer_epoch=st.just(-1),
    txn_timeout_ms=st.integers(-(2**31), 2**31 - 1),
    state=st.sampled_from([s for s in S if s not in (S.DEAD, S.PREPARE_EPOCH_FENCE)]),
    partitions=st.frozensets(
        st.tuples(st.text(min_size=1, max_size=10), st.integers(0, 2**31 - 1)), max_size=8
    ),
    txn_start_timestamp=int64,
    txn_last_update_timestamp=int64,
    client_transaction_version=st.integers(-(2**15), 2**15 - 1),
).map(lambda t: t if t.state is not S.EMPTY else _without_partitions(t))


def _without_partitions(t: TxnTransit) -> TxnTransit:
    import dataclasses

    return dataclasses.replace(t, partitions=frozenset())


@given(persisted)
def test_round_trip_v1(t: TxnTransit) -> None:
    assert decode(*encode(t, 1)) == t


@given(persisted)
def test_round_trip_v0_loses_only_the_tagged_fields(t: TxnTransit) -> None:
    import dataclasses

    expected = dataclasses.replace(
        t, prev_producer_id=-1, next_producer_id=-1, client_transaction_version=0
    )
    assert decode(*encode(t, 0)) == expected


common = persisted.flatmap(
    lambda t: st.builds(
        dataclasses.replace,
        st.just(t),
        prev_producer_id=st.sampled_from([-1, t.prev_producer_id]),
        next_producer_id=st.sampled_from([-1, t.next_producer_id]),
        client_transaction_version=st.sampled_from([0, t.client_transaction_version]),
        partitions=st.sampled_from([t.partitions, frozenset(list(t.partitions)[:1])]),
    )
)


@given(common)
def test_fast_v1_writer_gives_the_reference_bytes(t: TxnTransit) -> None:
    """The v1 writer's shortcuts (one partition; no tags or PreviousProducerId alone) write
    what the field-by-field writer writes."""
    assert log_format.encode_value(t, 1) == log_format._encode_value(t, 1)


@pytest.mark.parametrize(
    "partitions",
    [
        frozenset({("t" * 126, 0)}),  # one partition, its name's length one uvarint byte
        frozenset({("t" * 127, 5)}),  # ... two bytes (127 + 1)
        frozenset({("é" * 200, 2**31 - 1)}),  # 400 bytes of UTF-8
        frozenset({("t" * 300, p) for p in range(200)}),  # 200 ids: the count takes two bytes
        frozenset({(f"topic-{i}", 0) for i in range(130)}),  # 130 topics: so does theirs
    ],
)
@pytest.mark.parametrize(("prev", "next_", "tv"), [(-1, -1, 0), (7, -1, 0), (7, 8, 0), (-1, -1, 2)])
def test_fast_v1_writer_with_long_names_and_counts(
    partitions: frozenset[tuple[str, int]], prev: int, next_: int, tv: int
) -> None:
    """Lengths and counts past one uvarint byte, which the generated names (at most 10
    characters, 8 partitions) never reach."""
    t = transit(
        S.PREPARE_COMMIT,
        partitions=partitions,
        prev_producer_id=prev,
        next_producer_id=next_,
        client_transaction_version=tv,
    )
    assert log_format.encode_value(t, 1) == log_format._encode_value(t, 1)
    assert decode(*encode(t, 1)) == t


# -- placement -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "s, h",
    [
        ("", 0),
        ("a", 97),
        ("Aa", 2112),
        ("BB", 2112),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),  # the famous Integer.MIN_VALUE hash
        ("\U0001f600", 31 * 0xD83D + 0xDE00),  # one code point, two UTF-16 units
    ],
)
def test_java_string_hash(s: str, h: int) -> None:
    assert java_string_hash(s) == h


@given(st.text())
def test_java_string_hash_matches_int32_arithmetic(s: str) -> None:
    h = ctypes.c_int32(0)
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = ctypes.c_int32(31 * h.value + int.from_bytes(units[i : i + 2], "big"))
    assert java_string_hash(s) == h.value


def test_partition_for() -> None:
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    negative = next(s for s in (f"txn-{i}" for i in range(100)) if java_string_hash(s) < 0)
    assert partition_for(negative, 50) == -java_string_hash(negative) % 50
    assert partition_for("anything", 1) == 0


def test_a_lone_surrogate_is_one_utf16_unit_for_groups_and_transactions() -> None:
    # a Java String may hold a lone surrogate; both coordinators hash it as one code unit
    # (one of the two former copies raised UnicodeEncodeError on it)
    assert java_string_hash("\ud800") == 0xD800
    assert partition_for("g\udc00", 50) == (31 * ord("g") + 0xDC00) % 50
