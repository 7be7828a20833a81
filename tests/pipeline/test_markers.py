"""The exactly-once sink's markers: naming, encoding, the replay decision. No Spark."""

from __future__ import annotations

import pytest

from pipeline import markers
from pipeline.markers import Decision, InputDigest, Marker, MarkerError

Q = "3a853837-3525-4cc5-be27-c6d5b13f8d86"


def test_ids_are_per_query_and_task() -> None:
    assert markers.transactional_id("kafkad-sink-", Q, 3) == f"kafkad-sink-{Q}-3"
    assert markers.marker_group("p.", Q, 0) != markers.marker_group("p.", Q, 1)


def test_encode_decode_round_trip() -> None:
    for batch in (0, 1, 41, 2**40):
        offset, meta = markers.encode(Q, batch)
        assert offset == batch
        assert markers.decode(offset, meta, Q) == Marker(batch, None, None)
    digest = InputDigest()
    digest.add("t", b"v", None, -1, 0)
    offset, meta = markers.encode(Q, 3, digest)
    assert markers.decode(offset, meta, Q) == Marker(3, 1, digest.hex)
    v1 = f"kafkad-sink/1 query={Q} batch=3"  # written before markers recorded input
    assert markers.decode(3, v1, Q) == Marker(3, None, None)
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


def _m(batch: int | None) -> Marker | None:
    return None if batch is None else Marker(batch, None, None)


@pytest.mark.parametrize(
    ("done", "own", "batch", "decision"),
    [
        (None, None, 0, Decision.WRITE),
        (None, None, 7, Decision.WRITE),  # a task that had nothing to write before
        (None, 3, 4, Decision.WRITE),
        (None, 4, 4, Decision.SKIP),  # the replay of a batch this task committed
        (None, 5, 4, Decision.SKIP),
        (4, None, 4, Decision.SKIP_DONE),  # a complete batch, replayed with more tasks
        (3, 3, 4, Decision.WRITE),
    ],
)
def test_replay_decision(done: int | None, own: int | None, batch: int, decision: Decision) -> None:
    assert markers.decide(_m(done), _m(own), batch) is decision


def _digest(rows: list[bytes]) -> InputDigest:
    d = InputDigest()
    for r in rows:
        d.add("t", r, None, -1)
    return d


def test_input_digest_is_order_free_and_tells_inputs_apart() -> None:
    assert _digest([b"a", b"b", b"c"]).hex == _digest([b"c", b"a", b"b"]).hex
    assert _digest([b"a", b"b"]).hex != _digest([b"a", b"c"]).hex
    assert _digest([b"a", b"a"]).hex != _digest([b"a"]).hex
    d = InputDigest()
    d.add("t", b"ab", None)
    e = InputDigest()
    e.add("t", b"a", b"b")  # field boundaries count
    assert d.hex != e.hex


def test_replay_with_other_input_fails_loudly() -> None:
    rows = [b"%d" % i for i in range(1000)]
    committed = _digest(rows)
    own = Marker(2, committed.rows, committed.hex)
    markers.check_replay(own, 2, _digest(list(reversed(rows))))  # same rows: fine
    markers.check_replay(own, 1, _digest(rows[:250]))  # an older batch: nothing recorded
    markers.check_replay(Marker(2, None, None), 2, _digest(rows[:250]))  # a v1 marker
    with pytest.raises(MarkerError, match="250 rows now, 1000 then"):
        markers.check_replay(own, 2, _digest(rows[:250]))
