"""kafkad/eos_rules.py on synthetic partition logs: each rule finds its anomaly and stays
quiet on a clean exactly-once log."""

from __future__ import annotations

from kafkad.eos_rules import BatchView, check_partition, read_order, stuck_lso

NOW = 10_000_000
MIN15 = 15 * 60_000


def data(
    off: int, pid: int, seq: int, n: int = 1, epoch: int = 0, txn: bool = False, ts: int = NOW
) -> BatchView:
    return BatchView(off, off + n - 1, pid, epoch, seq, n, txn, False, None, ts)


def marker(off: int, pid: int, kind: str, epoch: int = 0) -> BatchView:
    return BatchView(off, off, pid, epoch, -1, 1, True, True, kind, NOW)


def kinds(batches: list[BatchView], reads: list[int], hw: int, lso: int) -> list[str]:
    return [f.kind for f in check_partition("t-0", batches, reads, hw, lso, NOW, MIN15)]


def test_a_clean_exactly_once_log_has_no_finding() -> None:
    log = [
        data(0, 1, 0, 2),
        data(2, 1, 2),  # idempotent, in sequence
        data(3, 2, 0, 2, txn=True),
        marker(5, 2, "COMMIT"),
        data(6, 2, 2, txn=True),
        marker(7, 2, "ABORT"),
        data(8, 1, 0, epoch=1),  # a new epoch starts its own run
    ]
    assert kinds(log, [0, 1, 2, 3, 4, 8], hw=9, lso=9) == []


def test_duplicate_and_out_of_order_sequences() -> None:
    assert kinds([data(0, 1, 0, 3), data(3, 1, 1)], [0, 1, 2, 3], 4, 4) == ["duplicate_sequence"]
    assert kinds([data(0, 1, 0, 3), data(3, 1, 7)], [0, 1, 2, 3], 4, 4) == ["out_of_order_sequence"]
    # compacted: the cleaner left 1 of the batch's 3 records (offsets 0-2, sequences 0-2)
    cleaned = BatchView(0, 2, 1, 0, 0, 1, False, False, None, NOW)
    assert kinds([cleaned, data(3, 1, 3)], [2, 3], 4, 4) == []
    # sequences wrap at 2^31
    assert kinds([data(0, 1, 2**31 - 1), data(1, 1, 0)], [0, 1], 2, 2) == []


def test_an_aborted_transactions_records_read_at_read_committed() -> None:
    log = [data(0, 2, 0, 2, txn=True), marker(2, 2, "ABORT"), data(3, 1, 0)]
    found = check_partition("t-0", log, [1, 3], 4, 4, NOW, MIN15)
    assert [(f.kind, f.detail) for f in found] == [
        ("aborted_read", "read_committed returned offset 1 of an aborted transaction")
    ]


def test_aborted_reads_among_interleaved_transactions_of_several_producers() -> None:
    # producer 3's aborted batches end up in the list after producer 2's later ones
    log = [
        data(0, 3, 0, 2, txn=True),
        data(2, 2, 0, 2, txn=True),
        data(4, 3, 2, txn=True),
        data(5, 2, 2, txn=True),
        marker(6, 2, "ABORT"),
        data(7, 4, 0, 3),
        marker(10, 3, "ABORT"),
    ]
    found = check_partition("t-0", log, [1, 4, 5, 6, 7, 8, 9], 11, 11, NOW, MIN15)
    assert [f.detail.split()[3] for f in found if f.kind == "aborted_read"] == ["1", "4", "5"]


def test_a_transaction_without_a_marker_past_the_timeout_and_the_lso_it_holds() -> None:
    old = NOW - MIN15 - 1
    log = [data(0, 1, 0), data(1, 2, 0, txn=True, ts=old)]
    assert kinds(log, [0], hw=2, lso=1) == ["open_transaction", "stuck_lso"]
    young = [data(0, 1, 0), data(1, 2, 0, txn=True)]
    assert kinds(young, [0], hw=2, lso=1) == []  # open, within its timeout: not a finding
    assert kinds([data(0, 1, 0)], [], hw=1, lso=0) == ["stuck_lso"]  # held by nothing


def test_shared_rules_of_the_workload_checker() -> None:
    assert stuck_lso("t-0", 3, 5) == "t-0: LSO 3 < high watermark 5 after the end"
    assert stuck_lso("t-0", 5, 5) is None
    assert read_order([1, 2, 2, 5, 4]) == [(2, 2), (5, 4)]


def test_a_compacted_log_is_not_flagged_for_the_batches_the_cleaner_removed() -> None:
    # Kafka's cleaner (and kafkad's) drops a batch whose records were all superseded (keys
    # a, b, b, c: the first b's batch goes), so a correct broker's compacted log skips
    # sequences; a repeated sequence is still a finding there.
    gap = [data(0, 1, 0), data(2, 1, 2), data(3, 1, 3)]  # offset 1 (sequence 1) cleaned away
    assert check_partition("t-0", gap, [0, 2, 3], 4, 4, NOW, MIN15, compacted=True) == []
    assert kinds(gap, [0, 2, 3], 4, 4) == ["out_of_order_sequence"]  # not compacted: a gap
    again = [data(0, 1, 0), data(2, 1, 2), data(3, 1, 2)]
    found = check_partition("t-0", again, [0, 2, 3], 4, 4, NOW, MIN15, compacted=True)
    assert [f.kind for f in found] == ["duplicate_sequence"]
