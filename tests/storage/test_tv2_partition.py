"""Transaction version 2 on the partition side: the coordinator writes each marker at the
transaction's epoch + 1, the partition takes that epoch as the producer's, so the finished
transaction's epoch is fenced (a late or retried write gets INVALID_PRODUCER_EPOCH and cannot
open a hanging transaction) while the next transaction starts at the bumped epoch from
sequence 0; the same after a kill -9."""

from __future__ import annotations

from pathlib import Path

from kio.schema.errors import ErrorCode

from storage.backends import open_store
from storage.segment.store import FileStore
from tests.storage.test_transactions import batch, open_partition, put, read_committed
from wire.records import read_batch_header

E = ErrorCode
NOW = 1_700_000_000_000
PID = 7


async def test_markers_at_the_bumped_epoch_fence_the_finished_transaction(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'data'}"
    async with open_store(url) as store:
        p = await open_partition(store)
        assert await put(p, batch(PID, 3, 0, 2, txn=True)) == 0
        assert await p.write_marker(PID, 4, True, 0, NOW) == 2  # TV2 commit: epoch 3 + 1
        late = batch(PID, 3, 2, txn=True)  # a late write of the committed transaction
        assert await p.append(late, read_batch_header(late), NOW) is E.invalid_producer_epoch
        assert not p.has_open_transaction(PID, 3)
        assert await put(p, batch(PID, 4, 0, txn=True)) == 3  # next transaction: seq 0
        assert await p.write_marker(PID, 5, False, 0, NOW) == 4  # TV2 abort: 4 + 1
        assert await read_committed(p, 0) == ([0, 1], [(PID, 3)])
        assert isinstance(store, FileStore)
        store.abandon()  # kill -9
    async with open_store(url) as store:
        p = await open_partition(store)
        for epoch, seq in ((4, 1), (3, 3)):
            stale = batch(PID, epoch, seq, txn=True)
            assert await p.append(stale, read_batch_header(stale), NOW) is E.invalid_producer_epoch
        # an older marker (a TV1 coordinator of the aborted epoch) is refused too
        assert await p.write_marker(PID, 4, False, 0, NOW) is E.invalid_producer_epoch
        assert await put(p, batch(PID, 5, 0, txn=True)) == 5
        assert p.last_stable_offset == 5
