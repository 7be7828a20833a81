"""Whether a Produce or Fetch response carries KIP-951 ``node_endpoints`` (pure, no I/O).

Produce (v10+) and Fetch (v16+) name a partition's new leader in ``node_endpoints``, the
top-level tagged field 0 that Kafka adds only when a partition answers NOT_LEADER_OR_FOLLOWER
(or FENCED_LEADER_EPOCH for Fetch) and the broker knows the new leader. The leader may be on a
host and port no Metadata has shown the proxy yet (a broker just added), so the test cannot be
"does a known host occur in the bytes". Decoding every such response with kio would cost the
proxy a Python object per partition on the hot path, so this module walks the wire format
instead, skipping records and strings by their lengths, down to the top-level tagged fields.
The layout follows ProduceResponse.json and FetchResponse.json of Kafka 4.2 (``Name`` in
Produce v10-12, ``TopicId`` from v13; Fetch v16+ always has topic ids).

The walk runs for every Produce v10+ and Fetch v16+ answer, so a partition as most answers
have it (Produce: no record errors, no message, no tagged fields; Fetch: no aborted
transactions, records under 16 KiB or skipped by length, no tagged fields) is stepped over
inline, without a call per field: a few lookups per partition.
"""

from __future__ import annotations

from wire.errors import DecodeError
from wire.headers import read_uvarint, skip_tagged_fields

PRODUCE_KEY = 0
FETCH_KEY = 1
NODE_ENDPOINTS_TAG = 0


def names_leaders(api_key: int, version: int, frame: bytes, body_start: int) -> bool:
    """Whether the response ``frame`` (no size prefix; its body from ``body_start``) has the
    top-level ``node_endpoints`` tagged field. DecodeError when the frame is cut short."""
    end = len(frame)
    try:
        if api_key == PRODUCE_KEY:
            pos = _produce_topics(frame, body_start, end, version) + 4  # throttle_time_ms
        elif api_key == FETCH_KEY:
            pos = _fetch_topics(frame, body_start + 4 + 2 + 4, end)  # throttle, error, session
        else:
            raise ValueError(f"api {api_key} has no KIP-951 node endpoints")
    except IndexError:  # a fast path read past the end
        raise DecodeError("response cut short") from None
    return _has_tag(frame, pos, end, NODE_ENDPOINTS_TAG)


# A partition as most answers have it, after its fixed-size fields: Produce's empty
# record_errors, null error_message and no tagged fields (no current_leader).
PRODUCE_PLAIN_TAIL = b"\x01\x00\x00"


def _produce_topics(buf: bytes, pos: int, end: int, version: int) -> int:
    topics, pos = _count(buf, pos, end)
    for _ in range(topics):
        pos = _skip_string(buf, pos, end) if version <= 12 else pos + 16
        partitions, pos = _count(buf, pos, end)
        for _ in range(partitions):
            pos += 4 + 2 + 8 + 8 + 8  # index, error, base offset, append time, log start
            if buf[pos : pos + 3] == PRODUCE_PLAIN_TAIL:
                pos += 3
                continue
            errors, pos = _count(buf, pos, end)
            for _ in range(errors):
                pos = _skip_string(buf, pos + 4, end)  # batch index, message
                pos = skip_tagged_fields(buf, pos, end)
            pos = _skip_string(buf, pos, end)  # error_message
            pos = skip_tagged_fields(buf, pos, end)
        pos = pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos, end)
    return pos


def _fetch_topics(buf: bytes, pos: int, end: int) -> int:
    topics, pos = _count(buf, pos, end)
    for _ in range(topics):
        partitions, pos = _count(buf, pos + 16, end)  # topic id
        for _ in range(partitions):
            pos += 4 + 2 + 8 + 8 + 8  # index, error, high watermark, last stable, log start
            if buf[pos] <= 1:  # aborted_transactions null or empty, the common case
                pos += 1
            else:
                aborted, pos = _count(buf, pos, end)
                for _ in range(aborted):
                    pos = skip_tagged_fields(buf, pos + 16, end)  # producer id, first offset
            pos += 4  # preferred replica
            size = buf[pos]  # records: compact nullable bytes (length + 1), skipped
            if size < 0x80:
                pos += size or 1
            elif buf[pos + 1] < 0x80:  # up to 16 KiB
                size = (size & 0x7F | buf[pos + 1] << 7) + 1
                pos += size
            else:
                pos = _skip_string(buf, pos, end)
            if buf[pos] == 0:  # no tagged fields (no diverging epoch, leader, snapshot)
                pos += 1
            else:
                pos = skip_tagged_fields(buf, pos, end)
        pos = pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos, end)
    return pos


def _count(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """A compact (nullable) array's length: null and empty are both 0."""
    n = buf[pos] if pos < end else 0x80  # one byte, the common case, without a call
    if n >= 0x80:
        n, pos = read_uvarint(buf, pos, end)  # DecodeError when pos is past the end
        return max(n - 1, 0), pos
    return max(n - 1, 0), pos + 1


def _skip_string(buf: bytes, pos: int, end: int) -> int:
    """Past a compact (nullable) string or bytes."""
    size, pos = _count(buf, pos, end)
    if pos + size > end:
        raise DecodeError("response cut short")
    return pos + size


def _has_tag(buf: bytes, pos: int, end: int, wanted: int) -> bool:
    if pos == end - 1 and buf[pos] == 0:  # the frame ends with no tagged fields
        return False
    count, pos = read_uvarint(buf, pos, end)  # DecodeError when pos is past the end
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos, end)
        if tag == wanted:
            return True
        size, pos = read_uvarint(buf, pos, end)
        pos += size
    return False
