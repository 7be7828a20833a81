"""The exactly-once sink's markers: naming, encoding, the replay decision. No Spark."""

from __future__ import annotations

import pytest

from pipeline import markers
from pipeline.markers import Decision, MarkerError

Q = "3a853837-3525-4cc5-be27-c6d5b13f8d86"


def test_ids_are_per_query_and_task() -> None:
    assert markers.transactional_id("kafkad-sink-", Q, 3) == f"kafkad-sink-{Q}-3"
    assert markers.marker_group("p.", Q, 0) != markers.marker_group("p.", Q, 1)


def test_encode_decode_round_trip() -> None:
    for batch in (0, 1, 41, 2**40):
        offset, meta = markers.encode(Q, batch)
        assert offset == batch
        assert markers.decode(offset, meta, Q) == batch
    with pytest.raises(ValueError):
        markers.encode(Q, -1)


def test_no_marker_yet() -> None:
    assert markers.decode(-1001, None, Q) is None  # librdkafka's OFFSET_INVALID
    assert markers.decode(-1, "", Q) is None


def test_foreign_markers_are_refused() -> None:
    offset, meta = markers.encode("another-query", 4)
    with pytest.raises(MarkerError, match="transactionalIdPrefix"):
        markers.decode(offset, meta, Q)
    with pytest.raises(MarkerError, match="not the sink's"):
        markers.decode(4, "", Q)
    with pytest.raises(MarkerError, match="not the sink's"):
        markers.decode(5, markers.encode(Q, 4)[1], Q)


@pytest.mark.parametrize(
    ("committed", "batch", "decision"),
    [
        (None, 0, Decision.WRITE),
        (None, 7, Decision.WRITE),  # a task that had nothing to write before
        (3, 4, Decision.WRITE),
        (4, 4, Decision.SKIP),  # the replay of a batch this task committed
        (5, 4, Decision.SKIP),
    ],
)
def test_replay_decision(committed: int | None, batch: int, decision: Decision) -> None:
    assert markers.decide(committed, batch) is decision
