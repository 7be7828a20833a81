"""The checker over hand-made histories: a clean one, then one per anomaly class, each the
clean history with exactly one thing broken, so every class is shown detectable and the
checker is shown not to confuse them."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from compat_tests.workload.checker import ANOMALIES, check

Ev = dict[str, Any]


def clean() -> list[Ev]:
    """Producer w1: A commits a0 (t/0@0) and a1 (t/1@0); B aborts b0 (t/0@1, marker @2); C
    commits c0 (t/0@3); D commits d0, d1 to the input in/0 (@0, @1). Copier w2: E copies d0 and
    d1 to out/0 and commits input offset 2 in group g. Reader r1 polls after the commits."""
    h: list[Ev] = []
    t = 0

    def ev(type_: str, **kw: Any) -> None:
        nonlocal t
        t += 10
        h.append({"type": type_, "t": t, **kw})

    def txn(
        tid: str,
        worker: str,
        sends: list[tuple[str, int, str, int, Any]],
        commit: bool,
        offsets: list[list[Any]] | None = None,
    ) -> None:
        ev("begin", txn=tid, worker=worker)
        for topic, p, v, off, src in sends:
            ev("send", txn=tid, topic=topic, partition=p, value=v, src=src)
            ev("ack", value=v, offset=off)
        if offsets:
            ev("offsets", txn=tid, group="g", offsets=offsets)
        ev("end", txn=tid, commit=commit, phase="invoke")
        ev("end", txn=tid, commit=commit, phase="ok")

    txn("A", "w1", [("t", 0, "a0", 0, None), ("t", 1, "a1", 0, None)], True)
    txn("B", "w1", [("t", 0, "b0", 1, None)], False)
    txn("C", "w1", [("t", 0, "c0", 3, None)], True)
    txn("D", "w1", [("in", 0, "d0", 0, None), ("in", 0, "d1", 1, None)], True)
    ev(
        "poll",
        reader="w2",
        isolation="read_committed",
        records=[["in", 0, 0, "d0"], ["in", 0, 1, "d1"]],
    )
    txn(
        "E",
        "w2",
        [("out", 0, "e0", 0, ["in", 0, 0]), ("out", 0, "e1", 1, ["in", 0, 1])],
        True,
        offsets=[["in", 0, 2]],
    )
    ev(
        "poll",
        reader="r1",
        isolation="read_committed",
        records=[["t", 0, 0, "a0"], ["t", 1, 0, "a1"], ["t", 0, 3, "c0"]],
    )
    ev("nemesis", kind="broker_kill")
    committed = {
        ("t", 0): [[0, "a0"], [3, "c0"]],
        ("t", 1): [[0, "a1"]],
        ("in", 0): [[0, "d0"], [1, "d1"]],
        ("out", 0): [[0, "e0"], [1, "e1"]],
    }
    everything = {**committed, ("t", 0): [[0, "a0"], [1, "b0"], [3, "c0"]]}
    hw = {("t", 0): 4, ("t", 1): 2, ("in", 0): 3, ("out", 0): 3}
    for iso, recs in (("read_committed", committed), ("read_uncommitted", everything)):
        for (topic, p), rs in recs.items():
            ev(
                "final_read",
                isolation=iso,
                topic=topic,
                partition=p,
                records=rs,
                end=hw[(topic, p)],
                complete=True,
            )
    for (topic, p), end in hw.items():
        ev("end_offsets", topic=topic, partition=p, lso=end, hw=end)
    ev("final_offsets", group="g", offsets=[["in", 0, 2]])
    return h


def find(h: list[Ev], **match: Any) -> Ev:
    (e,) = [e for e in h if all(e.get(k) == v for k, v in match.items())]
    return e


def final_rc(h: list[Ev], topic: str, p: int) -> Ev:
    return find(h, type="final_read", isolation="read_committed", topic=topic, partition=p)


def test_clean_history_is_clean() -> None:
    r = check(clean())
    assert r.clean, r.summary()
    assert r.counts["txns.committed"] == 4 and r.counts["txns.aborted"] == 1
    assert r.counts["nemesis.broker_kill"] == 1
    assert "checker: clean" in r.summary()


def lose_commit(h: list[Ev]) -> None:  # C committed, c0 never read
    final_rc(h, "t", 0)["records"] = [[0, "a0"]]
    find(h, type="final_read", isolation="read_uncommitted", topic="t", partition=0)["records"] = [
        [0, "a0"],
        [1, "b0"],
    ]
    find(h, type="poll", reader="r1")["records"].pop()


def lose_aborted_ack(h: list[Ev]) -> None:  # aborted b0 was acked at 1, then vanished
    e = find(h, type="final_read", isolation="read_uncommitted", topic="t", partition=0)
    e["records"] = [r for r in e["records"] if r[1] != "b0"]


def tear(h: list[Ev]) -> None:  # A committed, a1 missing
    final_rc(h, "t", 1)["records"] = []
    find(h, type="final_read", isolation="read_uncommitted", topic="t", partition=1)["records"] = []
    find(h, type="poll", reader="r1")["records"].pop(1)


def duplicate(h: list[Ev]) -> None:  # c0 written twice (a retried append stored again)
    for iso in ("read_committed", "read_uncommitted"):
        e = find(h, type="final_read", isolation=iso, topic="t", partition=0)
        e["records"] = [*e["records"], [4, "c0"]]


def inconsistent(h: list[Ev]) -> None:  # the ack of a1 names an offset that holds another value
    find(h, type="ack", value="a1")["offset"] = 0
    find(h, type="final_read", isolation="read_uncommitted", topic="t", partition=1)["records"] = [
        [0, "x-unsent-but-uncommitted-read-only"]
    ]


def aborted_read(h: list[Ev]) -> None:  # b0 (aborted) visible to read_committed
    final_rc(h, "t", 0)["records"] = [[0, "a0"], [1, "b0"], [3, "c0"]]


def unfinished_read(h: list[Ev]) -> None:  # a txn never asked to commit is visible
    h.insert(1, {"type": "begin", "txn": "Z", "worker": "w9", "t": 1})
    h.insert(2, {"type": "send", "txn": "Z", "topic": "t", "partition": 1, "value": "z0", "t": 2})
    e = final_rc(h, "t", 1)
    e["records"] = [*e["records"], [1, "z0"]]


def early_read(h: list[Ev]) -> None:  # r1's poll returned before C's commit was asked
    c_invoke = find(h, type="end", txn="C", phase="invoke")
    find(h, type="poll", reader="r1")["t"] = c_invoke["t"] - 1


def reorder(h: list[Ev]) -> None:  # c0 (sent after a0) stored before it
    for iso in ("read_committed", "read_uncommitted"):
        e = find(h, type="final_read", isolation=iso, topic="t", partition=0)
        e["records"] = [
            [0, "c0"],
            *[r for r in e["records"] if r[1] != "c0" and r[0] != 0],
            [3, "a0"],
        ]
    find(h, type="ack", value="a0")["offset"] = 3
    find(h, type="ack", value="c0")["offset"] = 0
    find(h, type="poll", reader="r1")["records"] = [["t", 1, 0, "a1"]]


def output_without_offsets(h: list[Ev]) -> None:  # E's copies visible, input offset not moved
    find(h, type="final_offsets")["offsets"] = [["in", 0, -1]]


def offsets_without_output(h: list[Ev]) -> None:  # E copies d0 only but commits past d1
    h.remove(find(h, type="send", value="e1"))
    h.remove(find(h, type="ack", value="e1"))
    for iso in ("read_committed", "read_uncommitted"):
        find(h, type="final_read", isolation=iso, topic="out", partition=0)["records"] = [[0, "e0"]]


def stuck(h: list[Ev]) -> None:
    find(h, type="end_offsets", topic="t", partition=0)["lso"] = 1


CASES: dict[str, tuple[str, Callable[[list[Ev]], None]]] = {
    "lost_write": ("lost_write", lose_commit),
    "lost_write(acked, aborted)": ("lost_write", lose_aborted_ack),
    "torn_txn": ("torn_txn", tear),
    "duplicate": ("duplicate", duplicate),
    "aborted_read": ("aborted_read", aborted_read),
    "uncommitted_read(never committed)": ("uncommitted_read", unfinished_read),
    "uncommitted_read(early)": ("uncommitted_read", early_read),
    "order": ("order", reorder),
    "offset_atomicity(output only)": ("offset_atomicity", output_without_offsets),
    "offset_atomicity(offsets only)": ("offset_atomicity", offsets_without_output),
    "stuck_lso": ("stuck_lso", stuck),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_anomaly_alone_is_found(case: str) -> None:
    kind, breaks = CASES[case]
    h = copy.deepcopy(clean())
    breaks(h)
    r = check(h)
    assert set(r.found) == {kind}, r.summary()
    assert r.anomalies[kind], r.summary()
    assert f"ANOMALY {kind}" in r.summary()


def test_every_class_has_a_case() -> None:
    assert {kind for kind, _ in CASES.values()} | {"inconsistent_offset"} == set(ANOMALIES)


def test_inconsistent_offsets() -> None:
    h = clean()
    find(h, type="ack", value="a1")["offset"] = 5  # ack says 5, the log has it at 0
    find(h, type="final_read", isolation="read_uncommitted", topic="t", partition=1)["records"] = [
        [0, "a1"],
        [5, "a0"],
    ]
    r = check(h)
    # a1 at 0 and 5 (duplicate) and offset 5 holding a1 and a0 (inconsistent); nothing else
    assert set(r.found) == {"duplicate", "inconsistent_offset"}, r.summary()


def test_stopped_final_read_is_a_stuck_lso() -> None:
    h = clean()
    final_rc(h, "t", 1)["complete"] = False
    assert set(check(h).found) == {"stuck_lso"}


def test_aborted_input_is_not_expected_copied() -> None:
    h = clean()  # B's b0 sits below no group's offset: nothing to say
    assert check(h).clean


def test_profiles_name_known_clients() -> None:
    from compat_tests.workload.profiles import PROFILES

    for name, p in PROFILES.items():
        # and kafkad's raw-protocol producer, in the TV2 or the classic flow
        producers = ("confluent", "kafka-python", "tv2", "raw-classic")
        assert p.producers and all(c in producers for c in p.producers), name
        # copiers may also be confluent-kafka consumers of the KIP-848 protocol
        known = (*producers, "confluent-consumer")
        assert all(c in known for c in p.copiers), name


def unacked_abort(h: list[Ev]) -> None:
    """B's abort asked, never acknowledged (the client failed: with transaction version 1 a
    late EndTxn(COMMIT) of A, the same epoch, may have committed B first), and b0 visible."""
    h.remove(find(h, type="end", txn="B", phase="ok"))
    aborted_read(h)


def test_an_unacknowledged_abort_may_have_committed() -> None:
    h = copy.deepcopy(clean())
    unacked_abort(h)
    r = check(h)
    assert r.clean, r.summary()
    assert r.counts["txns.abort_unacked"] == 1 and r.counts["txns.aborted"] == 0


def test_an_unacknowledged_abort_is_all_or_nothing() -> None:
    h = copy.deepcopy(clean())
    unacked_abort(h)
    h.insert(1, {"type": "send", "txn": "B", "topic": "t", "partition": 1, "value": "b1", "t": 1})
    assert set(check(h).found) == {"torn_txn"}  # b0 visible, b1 not


def test_an_acknowledged_abort_read_is_an_anomaly() -> None:
    h = copy.deepcopy(clean())
    aborted_read(h)
    assert find(h, type="end", txn="B", phase="ok")["commit"] is False
    assert set(check(h).found) == {"aborted_read"}


def late_offsets(h: list[Ev]) -> None:
    """Copier w2's transaction F (before E) sent offset 1 and was aborted: its TxnOffsetCommit,
    held past the client's timeout, landed in E (transaction version 1: the same epoch), so the
    group's final offset is F's 1, below E's acknowledged 2, with E's copy of in/0@1 visible."""
    i = h.index(find(h, type="begin", txn="E"))
    h[i:i] = [
        {"type": "begin", "txn": "F", "worker": "w2", "t": h[i]["t"] - 3},
        {
            "type": "offsets",
            "txn": "F",
            "group": "g",
            "offsets": [["in", 0, 1]],
            "t": h[i]["t"] - 2,
        },
        {"type": "end", "txn": "F", "commit": False, "phase": "invoke", "t": h[i]["t"] - 1},
        {"type": "end", "txn": "F", "commit": False, "phase": "ok", "t": h[i]["t"] - 1},
    ]
    find(h, type="final_offsets")["offsets"] = [["in", 0, 1]]


def test_a_late_offset_commit_of_an_earlier_transaction_is_not_an_anomaly() -> None:
    h = copy.deepcopy(clean())
    late_offsets(h)
    r = check(h)
    assert r.clean, r.summary()
    assert r.counts["late_offsets"] == 1


def test_a_final_offset_no_transaction_sent_late_is_still_an_anomaly() -> None:
    h = copy.deepcopy(clean())
    late_offsets(h)
    find(h, type="offsets", txn="F")["offsets"] = [["in", 0, 0]]  # F sent 0, not the final 1
    assert set(check(h).found) == {"offset_atomicity"}


def late_committed(h: list[Ev], worker: str, slow_predecessor: bool = True) -> None:
    """A (of ``worker``) as a late EndTxn(COMMIT) of its predecessor P leaves it: P, empty, was
    asked to commit 5 s before A began and acknowledged 4 s later (retried after the client's
    timeout); a0 landed and was read before A's commit was asked; a1's send failed and it never
    landed; A's own commit failed. a0 stays visible, a1 is in no read. Without
    ``slow_predecessor``, P's commit is acknowledged at once."""
    begin = find(h, type="begin", txn="A")
    begin["worker"] = worker
    s = 1_000_000_000
    ok = begin["t"] - (1 if slow_predecessor else 5 * s - 1)
    h[h.index(begin) : h.index(begin)] = [
        {"type": "begin", "txn": "P", "worker": worker, "t": begin["t"] - 5 * s},
        {"type": "end", "txn": "P", "commit": True, "phase": "invoke", "t": begin["t"] - 5 * s},
        {"type": "end", "txn": "P", "commit": True, "phase": "ok", "t": ok},
    ]
    find(h, type="ack", value="a1").update(error="_MSG_TIMED_OUT", offset=-1)
    h.remove(find(h, type="end", txn="A", phase="ok"))
    commit = find(h, type="end", txn="A", phase="invoke")
    h.insert(h.index(commit) + 1, {**commit, "phase": "fail", "t": commit["t"] + 1})
    h.insert(
        h.index(commit),
        {
            "type": "poll",
            "reader": "r0",
            "isolation": "read_committed",
            "t": commit["t"] - 1,
            "records": [["t", 0, 0, "a0"]],
        },
    )
    for iso in ("read_committed", "read_uncommitted"):
        find(h, type="final_read", isolation=iso, topic="t", partition=1)["records"] = []


def test_a_classic_commit_that_failed_with_a_send_may_be_part_visible() -> None:
    h = copy.deepcopy(clean())
    late_committed(h, "p2-confluent.1")
    r = check(h)
    assert r.clean, r.summary()
    assert r.counts["txns.late_commit_possible"] == 1 and r.counts["txns.indeterminate"] == 1


def test_a_failed_classic_commit_is_all_or_nothing_without_a_retried_commit_before_it() -> None:
    h = copy.deepcopy(clean())
    late_committed(h, "p2-confluent.1", slow_predecessor=False)
    assert set(check(h).found) == {"torn_txn", "uncommitted_read"}


def test_a_tv2_commit_that_failed_with_a_send_is_still_all_or_nothing() -> None:
    h = copy.deepcopy(clean())
    late_committed(h, "p0-tv2.1")
    assert set(check(h).found) == {"torn_txn", "uncommitted_read"}


def test_an_indeterminate_commit_whose_sends_all_succeeded_is_all_or_nothing() -> None:
    h = copy.deepcopy(clean())
    late_committed(h, "p2-confluent.1")
    find(h, type="ack", value="a1").update(error=None, offset=0)  # a1 acknowledged, not visible
    rows = [[0, "a1"]]  # a1 landed: in the log, not committed
    find(h, type="final_read", isolation="read_uncommitted", topic="t", partition=1)["records"] = (
        rows
    )
    assert set(check(h).found) == {"torn_txn", "uncommitted_read"}
