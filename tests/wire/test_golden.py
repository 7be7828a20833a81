"""Golden frames captured from the five stock clients (tests/wire/frames/, see its README):
each decodes, each Produce batch validates, and kio re-encodes each request byte for byte."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from kio.serial import entity_writer

import proxy.handlers  # noqa: F401  (registers every handler)
from proxy.registry import served
from wire.codec import decode_request
from wire.headers import read_request_header, request_header
from wire.records import ValidatedBatch, validate_produce_batch

FRAMES_DIR = Path(__file__).parent / "frames"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CLIENTS = ("kafka_python", "aiokafka", "confluent_kafka", "kcat", "kafkajs")


def load_frames() -> dict[str, bytes]:
    return {p.stem: bytes.fromhex(p.read_text()) for p in sorted(FRAMES_DIR.glob("*.hex"))}


FRAMES = load_frames()
SERVED = served()


def test_every_client_and_api_is_covered() -> None:
    names = set(FRAMES)
    for client in CLIENTS:
        for api in ("api_versions", "metadata", "produce", "list_offsets"):
            assert any(n.startswith(api) and client in n for n in names), (api, client)
    for client in ("kafka_python", "aiokafka", "confluent_kafka", "kafkajs"):
        assert any(n.startswith("create_topics") and client in n for n in names), client
    for client in CLIENTS:
        assert any(n.startswith("fetch") and client in n for n in names), client
    groups = ("find_coordinator", "join_group", "sync_group", "heartbeat", "leave_group")
    groups += ("offset_fetch", "offset_commit")
    for client in CLIENTS:
        for api in groups:
            if (api, client) != ("offset_commit", "kafkajs"):  # only with autoCommit
                assert any(n.startswith(api + "_v") and client in n for n in names), (api, client)
    txn = ("init_producer_id", "add_partitions_to_txn", "add_offsets_to_txn", "end_txn")
    txn += ("txn_offset_commit",)
    for client in ("kafka_python", "aiokafka", "confluent_kafka", "kafkajs"):
        for api in txn:
            assert any(n.startswith(api + "_v") and client in n for n in names), (api, client)
    codecs = {n.rsplit("_", 1)[1] for n in names if n.startswith("produce")}
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}


def test_files_are_one_hex_line() -> None:
    for p in FRAMES_DIR.glob("*.hex"):
        text = p.read_text()
        assert text.endswith("\n") and text.count("\n") == 1, p.name
        assert text.strip() == text.strip().lower(), p.name


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_decodes(name: str) -> None:
    header, body = decode_request(FRAMES[name], SERVED)
    match = re.fullmatch(r"(?P<api>[a-z_]+)_v(?P<version>\d+)_.*", name)
    assert match is not None
    api, version = match["api"], int(match["version"])
    assert header.api_version == version
    assert type(body).__name__.lower().startswith(api.replace("_", ""))


@pytest.mark.parametrize("name", sorted(n for n in FRAMES if n.startswith("produce")))
def test_produce_batches_validate(name: str) -> None:
    header, body = decode_request(FRAMES[name], SERVED)
    batches = [p.records for t in body.topic_data for p in t.partition_data]
    assert batches
    for records in batches:
        checked = validate_produce_batch(
            records, produce_version=header.api_version, max_message_bytes=1 << 20
        )
        assert isinstance(checked, ValidatedBatch), checked
        assert CODECS[checked.header.compression] == name.rsplit("_", 1)[1]


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_reencodes_byte_for_byte(name: str) -> None:
    frame = FRAMES[name]
    header, body = decode_request(frame, SERVED)
    cls = type(body)
    _, pos = read_request_header(frame, cls.__flexible__)
    assert request_header(header, cls.__flexible__) == frame[:pos]
    buf = io.BytesIO()
    entity_writer(cls)(buf, body)
    assert buf.getvalue() == frame[pos:]
