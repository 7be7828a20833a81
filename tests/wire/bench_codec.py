"""Microbenchmarks of the wire hot paths (not collected by pytest).

python -m tests.wire.bench_codec
"""

from __future__ import annotations

import datetime
import io
import os
import time
from collections.abc import Callable

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import response as fetch
from kio.schema.produce.v9.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kio.serial import entity_writer
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

from wire.codec import decode_request, encode_response
from wire.headers import RequestHeader, request_header
from wire.records import Record, build_batch, validate_produce_batch

BATCH = build_batch([Record(0, 0, None, os.urandom(16 * 1024 - 70))], base_timestamp=0)
SUPPORTED = {0: (0, 11), 1: (4, 12)}
ZERO = i32Timedelta.parse(datetime.timedelta(0))


def produce_frame() -> bytes:
    request = ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(
            TopicProduceData(
                name="bench",
                partition_data=(PartitionProduceData(index=i32(0), records=Records(BATCH)),),
            ),
        ),
    )
    buf = io.BytesIO()
    buf.write(request_header(RequestHeader(0, 9, 42, "bench"), flexible=True))
    entity_writer(ProduceRequest)(buf, request)
    return buf.getvalue()


def fetch_response() -> fetch.FetchResponse:
    partition = fetch.PartitionData(
        partition_index=i32(0),
        error_code=ErrorCode.none,
        high_watermark=i64(1),
        last_stable_offset=i64(1),
        log_start_offset=i64(0),
        aborted_transactions=(),
        preferred_read_replica=i32(-1),
        records=Records(BATCH),
    )
    return fetch.FetchResponse(
        throttle_time=ZERO,
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=(fetch.FetchableTopicResponse(topic="bench", partitions=(partition,)),),
    )


def bench(name: str, fn: Callable[[], object], n: int = 20_000) -> None:
    for _ in range(1000):
        fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n * 1e6)
    print(f"{name:50s} {best:6.2f} µs/op")


def main() -> None:
    frame, response = produce_frame(), fetch_response()
    header = RequestHeader(1, 12, 7, "bench")
    bench("decode_request Produce v9, one 16 KiB batch", lambda: decode_request(frame, SUPPORTED))
    bench(
        "validate_produce_batch, 16 KiB",
        lambda: validate_produce_batch(BATCH, produce_version=9, max_message_bytes=1 << 20),
    )
    bench("encode_response Fetch v12, 16 KiB records", lambda: encode_response(header, response))


if __name__ == "__main__":
    main()
