"""EndTxn and AddPartitionsToTxn responses encoded straight from the handler's answer.

As ``wire/produce_response.py`` for Produce: the generic path (``wire.versions.convert`` down
to the client's version, then kio's reflective writer) is a measurable share of a small
transaction's broker CPU (``bench/txn_cpu.py``), for answers of a few fields. These write the
same bytes from the newest version's response object (duck-typed: kio's EndTxnResponse v5,
AddPartitionsToTxnResponse v5), as EndTxnResponse.json and AddPartitionsToTxnResponse.json
lay them out:

    EndTxn               v0+  throttle_time_ms, error_code
                         v3+  flexible (tagged fields)
                         v5+  producer_id, producer_epoch
    AddPartitionsToTxn   v0+  throttle_time_ms
                         v0-3 results_by_topic_v3_and_below [name, results_by_partition
                              [partition_index, partition_error_code]]
                         v3+  flexible: compact arrays and strings, tagged fields
                         v4+  error_code, results_by_transaction [transactional_id,
                              topic_results (as above)]

Below v4 an AddPartitionsToTxn answer carries its first transaction's topic results (none if
it has none), as the handler's ``downgrade`` gives the generic path. Error codes a version
predates are translated as ``encode_response`` does (``wire.errors.translations_for``).
``tests/wire/test_txn_responses.py`` checks the bytes equal the generic path's for generated
responses of every version.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from wire.errors import translations_for
from wire.headers import response_header
from wire.produce_response import append_count, append_string

END_TXN_KEY = 26
ADD_PARTITIONS_KEY = 24
NEWEST_END_TXN = 5
NEWEST_ADD_PARTITIONS = 5

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD_V0 = struct.Struct(">ih")  # throttle_time_ms, error_code
_PRODUCER = struct.Struct(">qh")  # producer_id, producer_epoch
_PARTITION = struct.Struct(">ih")  # partition_index, partition_error_code


def _millis(resp: Any) -> int:
    ms: int = round(resp.throttle_time.total_seconds() * 1000)
    return ms


def _code_of(api_key: int, version: int) -> Callable[[Any], int]:
    codes = translations_for(api_key, version)
    return (lambda c: int(codes.get(c, c))) if codes else int


def encode_end_txn_response(correlation_id: int, version: int, resp: Any) -> bytes:
    """The whole response frame (size, header, body) of ``resp`` at ``version`` (0-5)."""
    if not 0 <= version <= NEWEST_END_TXN:
        raise ValueError(f"end_txn v{version} is not encoded here")
    flexible = version >= 3
    out = bytearray(b"\0\0\0\0")
    out += response_header(correlation_id, flexible)
    out += _HEAD_V0.pack(_millis(resp), _code_of(END_TXN_KEY, version)(resp.error_code))
    if version >= 5:
        out += _PRODUCER.pack(resp.producer_id, resp.producer_epoch)
    if flexible:
        out.append(0)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def _topics(out: bytearray, topics: Any, flexible: bool, code_of: Callable[[Any], int]) -> None:
    append_count(out, len(topics), flexible)
    for t in topics:
        append_string(out, t.name, flexible)
        parts = t.results_by_partition
        append_count(out, len(parts), flexible)
        for p in parts:
            out += _PARTITION.pack(p.partition_index, code_of(p.partition_error_code))
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)


def encode_add_partitions_to_txn_response(correlation_id: int, version: int, resp: Any) -> bytes:
    """The whole response frame (size, header, body) of ``resp`` at ``version`` (0-5)."""
    if not 0 <= version <= NEWEST_ADD_PARTITIONS:
        raise ValueError(f"add_partitions_to_txn v{version} is not encoded here")
    flexible = version >= 3
    code_of = _code_of(ADD_PARTITIONS_KEY, version)
    out = bytearray(b"\0\0\0\0")
    out += response_header(correlation_id, flexible)
    out += _I32.pack(_millis(resp))
    txns = resp.results_by_transaction
    if version < 4:
        _topics(out, txns[0].topic_results if txns else (), flexible, code_of)
    else:
        out += _I16.pack(code_of(resp.error_code))
        append_count(out, len(txns), True)
        for txn in txns:
            append_string(out, txn.transactional_id, True)
            _topics(out, txn.topic_results, True, code_of)
            out.append(0)
    if flexible:
        out.append(0)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
