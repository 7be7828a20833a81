"""The seam between the file backend and the disk calls that fail when a disk does.

Every ``pwrite``, ``write``, ``ftruncate``, ``fsync`` and ``fdatasync`` of the file backend's
data path goes through ``osio.ops``: an ``Ops`` that calls ``os``. Tests install a subclass
that fails the Nth call with EIO or ENOSPC (``tests/storage/faulty.py``: ``FaultyDisk``), so
storage faults are reproducible without a sick disk or a full filesystem. Reads, opens and
renames call ``os`` directly.

What a fault does (decided in ``segment.py``/``log.py``/``commit.py``, tested in
``tests/storage/test_storage_faults.py`` and ``tests/proxy/test_storage_faults.py``): Kafka
answers KAFKA_STORAGE_ERROR and takes the whole log directory offline on any IOException
(``LogDirFailureChannel``) until restart. kafkad undoes a failed write (truncate back: the
partition goes on, which is what a transiently full disk needs) and takes only the partition
offline when the files are in doubt (an fsync failed, or the truncate did too); a restart
recovers it to its last whole batch. No append is acknowledged before its write (and, with
``log.flush.interval.messages=1``, its fsync) succeeded.
"""

from __future__ import annotations

import os

Buffer = bytes | bytearray | memoryview


class Ops:
    def pwrite(self, fd: int, data: Buffer, pos: int) -> int:
        return os.pwrite(fd, data, pos)

    def write(self, fd: int, data: Buffer) -> int:
        return os.write(fd, data)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def fdatasync(self, fd: int) -> None:
        os.fdatasync(fd)


ops: Ops = Ops()


def install(new: Ops) -> Ops:
    """Route the backend's disk calls through ``new``; returns the previous ``Ops``."""
    global ops
    old, ops = ops, new
    return old
