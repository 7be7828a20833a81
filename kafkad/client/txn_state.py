"""DescribeTransactions v0 responses, read by hand: kio refuses the -1 start time Kafka
sends for a transactional id with no open transaction ("Cannot parse negative timestamp").

v0 is flexible (compact strings and arrays: uvarint length + 1; a tagged-field section after
each struct and at the end):

    throttle_time_ms i32, [error_code i16, transactional_id string, transaction_state string,
    transaction_timeout_ms i32, transaction_start_time_ms i64, producer_id i64,
    producer_epoch i16, [topic string, [partition i32]]]
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from wire.headers import read_uvarint, skip_tagged_fields

__all__ = ["TxnState", "parse_describe_transactions_v0"]


@dataclass
class TxnState:
    error_code: int
    transactional_id: str
    state: str
    timeout_ms: int
    start_time_ms: int
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]] = field(default_factory=list)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def fixed(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        value, self.pos = read_uvarint(self.buf, self.pos, len(self.buf))
        return value

    def length(self) -> int:
        return self.uvarint() - 1  # -1: null

    def string(self) -> str:
        size = max(self.length(), 0)
        text = self.buf[self.pos : self.pos + size].decode()
        self.pos += size
        return text

    def skip_tags(self) -> None:
        self.pos = skip_tagged_fields(self.buf, self.pos, len(self.buf))


def parse_describe_transactions_v0(body: bytes) -> list[TxnState]:
    r = _Reader(body)
    r.fixed(">i")  # throttle
    out = []
    for _ in range(max(r.length(), 0)):
        code, tid, state = r.fixed(">h"), r.string(), r.string()
        timeout, start, pid, epoch = r.fixed(">i"), r.fixed(">q"), r.fixed(">q"), r.fixed(">h")
        s = TxnState(code, tid, state, timeout, start, pid, epoch)
        for _ in range(max(r.length(), 0)):
            topic = r.string()
            s.partitions.extend((topic, r.fixed(">i")) for _ in range(max(r.length(), 0)))
            r.skip_tags()
        r.skip_tags()
        out.append(s)
    r.skip_tags()
    return out
