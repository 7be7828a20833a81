"""Classic (transaction version 0/1) transactions write exactly the records they wrote before
the TV2 slice: a fixed flow through every classic write path (commit, new-instance bump, fence
of an ongoing transaction, timeout abort, KIP-360 InitProducerId, abort, the TV1 fence to
Short.MaxValue and the producer id rotation after it), with the log's digest and the answers
taken from main at bb64c18, before TV2. The one intended difference: an AddPartitionsToTxn of
the fenced producer while the abort's markers are in flight answers CONCURRENT_TRANSACTIONS
(Kafka 4.0+ checks the pending state first, KAFKA-18660), where it answered PRODUCER_FENCED."""

from __future__ import annotations

import hashlib

from kio.schema.errors import ErrorCode

from coordinator.txn import lifecycle, log_format
from coordinator.txn.metadata import TxnTransit
from coordinator.txn.state import TxnState
from tests.coordinator.txn.helpers import Coordinator

E = ErrorCode

# sha256 of the records the flow below wrote at bb64c18 (key | value ; ...)
BEFORE_TV2 = "213ae845cdf7cb15aa9c17ef2a5cb37d8e8351ae48b288cd438fa6e78fe43078"


def test_classic_flow_writes_the_records_it_wrote_before_tv2() -> None:
    c = Coordinator()
    codes: list[ErrorCode] = []

    def step(outcome: object) -> None:
        assert outcome is not None
        codes.append(c.run(outcome))  # type: ignore[arg-type]

    step(c.init("tx"))
    pid, epoch = c.ids()
    step(c.add("tx", pid, epoch, ("out", 0), ("out", 1)))
    step(c.add_offsets("tx", pid, epoch, 7))
    step(c.end("tx", pid, epoch, True))
    c.finish_markers("tx")
    step(c.init("tx"))  # a new instance: bump
    pid, epoch = c.ids()
    step(c.add("tx", pid, epoch, ("out", 2)))
    step(c.init("tx"))  # fences the ongoing transaction
    zombie_add = c.add("tx", pid, epoch, ("out", 0))  # the abort's markers in flight
    c.finish_markers("tx")
    step(c.init("tx"))
    pid, epoch = c.ids()
    step(c.add("tx", pid, epoch, ("out", 0)))
    c.now_ms += 120_000
    for meta in lifecycle.expired_transactions(c.cache, c.now_ms):
        step(lifecycle.abort_timed_out(meta, c.now_ms))
    c.finish_markers("tx")
    kip360 = c.init("tx", pid=pid, epoch=epoch)  # TV1 fence forgot the last epoch: fenced
    pid, epoch = c.ids()
    abort_after_fence = c.end("tx", pid, epoch, False)  # the fence's CompleteAbort: NONE
    step(c.add("tx", pid, epoch, ("out", 1)))
    step(c.end("tx", pid, epoch, False))
    c.finish_markers("tx")
    retry = c.end("tx", pid, epoch, False)
    # near the top of the epoch range: a TV1 fence to Short.MaxValue, then a new producer id
    top = TxnTransit(
        "top", 5, 5, -1, 32765, -1, 60_000, TxnState.COMPLETE_COMMIT, frozenset(), 1, 1, 0
    )
    c.log.append(log_format.encode(top))
    c.cache.replay([log_format.decode(*log_format.encode(top))])
    step(c.init("top"))
    pid, epoch = c.ids("top")
    step(c.add("top", pid, epoch, ("out", 0)))
    step(c.init("top"))
    c.finish_markers("top")
    step(c.init("top"))

    assert codes == [E.none] * 6 + [E.concurrent_transactions] + [E.none] * 7 + [
        E.concurrent_transactions,
        E.none,
    ]
    assert zombie_add is E.concurrent_transactions  # was PRODUCER_FENCED before (KAFKA-18660)
    assert c.add("tx", 1000, 1, ("out", 0)) is E.producer_fenced  # once the abort is complete
    assert (kip360, abort_after_fence, retry) == (E.producer_fenced, E.none, E.none)
    assert c.ids("top") == (1001, 0)
    digest = hashlib.sha256(b"".join(k + b"|" + (v or b"-") + b";" for k, v in c.log))
    assert len(c.log) == 22
    assert digest.hexdigest() == BEFORE_TV2
