"""``wire.record_scan.key_values`` agrees with ``decode_batch_records`` on every batch."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wire.record_scan import key_values
from wire.records import Record, RecordBatchError, build_batch, decode_batch_records

blobs = st.one_of(st.none(), st.binary(max_size=300))
records = st.lists(
    st.tuples(
        blobs,
        blobs,
        st.integers(-(2**40), 2**40),
        st.lists(st.tuples(st.text(max_size=5), blobs), max_size=2),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(recs=records, codec=st.sampled_from([0, 1, 2, 3, 4]), gap=st.integers(1, 300))
def test_key_values_matches_the_decoder(
    recs: list[tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]],
    codec: int,
    gap: int,
) -> None:
    batch = build_batch(
        [Record(i * gap, ts, k, v, h) for i, (k, v, ts, h) in enumerate(recs)],
        base_timestamp=1_700_000_000_000,
        compression=codec,
    )
    expected = [(r.offset_delta, r.key, r.value) for r in decode_batch_records(batch)]
    assert key_values(batch) == expected


def test_truncated_records_are_refused() -> None:
    batch = bytearray(build_batch([Record(0, 0, b"k", b"v" * 50)], base_timestamp=0))
    batch[61] = 0x7E  # a record length far past the batch
    with pytest.raises(RecordBatchError):
        key_values(bytes(batch))
