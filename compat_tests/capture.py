"""Record golden request frames from the five stock clients (regenerates tests/wire/frames/).

    python -m compat_tests.capture [--out tests/wire/frames] [--clients kcat,kafkajs,...]

How: a kafkad subprocess listens on a free port, and each client run goes through its own
``kafkad proxy --record DIR`` subprocess (proxy/forward/), which rewrites broker addresses so
every connection of the client passes through it and records each frame; the request frames
are then read back from the recordings (proxy/forward/record.py), in arrival order. Setup
steps a client cannot do itself (creating kcat's topic, the transaction flows' input) go
straight to the broker, unrecorded. Each client then does, in turn: ApiVersions, Metadata,
CreateTopics, Produce with each compression codec it supports, ListOffsets and Fetch; then
(``txn`` flows) a group consumer (FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
OffsetFetch, OffsetCommit, LeaveGroup; kafkajs commits no offsets outside a transaction)
and, except kcat, a consume-transform-produce transaction (InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn).

For every (api, version, client[, codec]) the first frame seen is kept, provided the API is
named in ``API_NAMES`` and ``wire.codec.decode_request`` accepts it (a version kafkad does not
serve, such as the ApiVersions probe at a client's newest version, is reported and skipped).
Files are ``<api>_v<version>_<client>[_<codec>].hex``: one frame, without its 4-byte size
prefix, as hex on one line with a trailing newline. Frames hold client ids, topic names,
timestamps and topic ids of the capture run, so a regenerated set differs from the checked-in
one in those bytes; ``--keep-existing`` writes only the frames that have no file yet.

What each client cannot do here: kcat has no admin API (no CreateTopics) and no transactional
producer; kafkajs has no consumer without consumer groups (its Fetch comes from the group
flow), and only gzip without codec plugins.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import proxy.handlers  # noqa: F401, E402  (registers every handler)
from proxy.forward.record import Kind  # noqa: E402
from proxy.forward.record import read as read_recording  # noqa: E402
from proxy.registry import served  # noqa: E402
from wire.codec import decode_request  # noqa: E402
from wire.errors import ProtocolError  # noqa: E402

API_NAMES = {18: "api_versions", 3: "metadata", 19: "create_topics", 0: "produce"}
API_NAMES |= {1: "fetch", 2: "list_offsets"}
# groups and transactions (the ``txn`` flows below)
API_NAMES |= {8: "offset_commit", 9: "offset_fetch", 10: "find_coordinator", 11: "join_group"}
API_NAMES |= {12: "heartbeat", 13: "leave_group", 14: "sync_group", 22: "init_producer_id"}
API_NAMES |= {24: "add_partitions_to_txn", 25: "add_offsets_to_txn", 26: "end_txn"}
API_NAMES |= {28: "txn_offset_commit"}
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CLIENTS = ("kafka_python", "aiokafka", "confluent_kafka", "kcat", "kafkajs")
TIMEOUT_S = 30
VALUE = b"golden " * 100  # compressible: librdkafka sends a batch uncompressed if that is smaller


# -- the recording proxy --------------------------------------------------------------------


def recorded_run(upstream: str, record_dir: Path, runner: Callable[[str], None]) -> None:
    """Run ``runner(bootstrap)`` through a ``kafkad proxy`` subprocess recording into
    ``record_dir`` (every client connection goes through it: it rewrites broker addresses)."""
    args = [sys.executable, "-m", "proxy.cli", "proxy", "--upstream", upstream]
    args += ["--listen", "127.0.0.1:0", "--record", str(record_dir), "--log-level", "WARNING"]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "kafkad proxy ready listen=127.0.0.1:PORT upstream=..."
        runner(line.split()[3].removeprefix("listen="))
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def recorded_requests(record_dir: Path, tag: str) -> list[tuple[str, bytes]]:
    """Every request frame of the recordings in ``record_dir``, in the order they arrived."""
    timed = []
    for path in record_dir.glob("*.kdrec"):
        rec = read_recording(path)
        start = rec.meta["started_unix"]
        timed += [
            (start + e.micros / 1e6, e.payload) for e in rec.entries if e.kind is Kind.REQUEST
        ]
    return [(tag, frame) for _t, frame in sorted(timed, key=lambda item: item[0])]


# -- the broker ---------------------------------------------------------------------------


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[str], int]:
    args = [sys.executable, "-m", "proxy.cli", "serve", "--listen", "127.0.0.1:0"]
    args += ["--data-dir", str(data_dir)]
    proc = subprocess.Popen(
        args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "kafkad ready listen=127.0.0.1:PORT advertise=..."
    listen = line.split()[2]
    return proc, int(listen.rsplit(":", 1)[1])


# -- the clients --------------------------------------------------------------------------


def topic() -> str:
    return f"golden-{uuid.uuid4().hex[:8]}"


def run_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as TP
    from kafka.admin import NewTopic

    name = topic()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="golden-kafka-python")
    admin.create_topics([NewTopic(name, 1, 1)])
    admin.close()
    for codec in (None, "gzip", "snappy", "lz4", "zstd"):
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=False, compression_type=codec
        )
        producer.send(name, key=b"k", value=VALUE, timestamp_ms=1_700_000_000_000)
        producer.flush(TIMEOUT_S)
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=100)
    tp = TP(name, 0)
    consumer.assign([tp])
    consumer.offsets_for_times({tp: 1_700_000_000_000})
    consumer.seek_to_beginning(tp)
    _poll_until(lambda: sum(len(b) for b in consumer.poll(timeout_ms=200).values()))
    consumer.close()


def run_aiokafka(bootstrap: str) -> None:
    async def main() -> None:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka import TopicPartition as TP
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        name = topic()
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(name, 1, 1)])
        await admin.close()
        for codec in (None, "gzip", "snappy", "lz4", "zstd"):
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec)
            await producer.start()
            await producer.send_and_wait(name, VALUE, key=b"k")
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        await consumer.start()
        tp = TP(name, 0)
        consumer.assign([tp])
        await consumer.offsets_for_times({tp: 1_700_000_000_000})
        await consumer.seek_to_beginning(tp)
        await asyncio.wait_for(consumer.getone(), TIMEOUT_S)
        await consumer.stop()

    asyncio.run(main())


def run_confluent_kafka(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    name = topic()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, 1, 1)]).values():
        fut.result(TIMEOUT_S)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": False,
                "compression.codec": codec,
            }
        )
        producer.produce(name, VALUE, b"k")
        assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "golden", "enable.auto.commit": False}
    )
    consumer.offsets_for_times([TopicPartition(name, 0, 1_700_000_000_000)], TIMEOUT_S)
    consumer.assign([TopicPartition(name, 0, 0)])
    _poll_until(lambda: consumer.poll(0.2) is not None)
    consumer.close()


def run_kcat(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    exe = shutil.which("kcat")
    assert exe is not None, "kcat is not installed: run scripts/install-client-tools"
    name = topic()
    # kcat cannot create topics: confluent-kafka does, straight to the broker (unrecorded)
    admin = AdminClient({"bootstrap.servers": UPSTREAM})
    for fut in admin.create_topics([NewTopic(name, 1, 1)]).values():
        fut.result(TIMEOUT_S)
    base = [exe, "-b", bootstrap, "-m", "10"]
    lines = ("golden " * 40 + "\n") * 5
    run: dict[str, Any] = dict(capture_output=True, text=True, timeout=TIMEOUT_S, check=True)
    subprocess.run([*base, "-L", "-t", name], **run)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        subprocess.run([*base, "-P", "-t", name, "-z", codec], input=lines, **run)
    subprocess.run([*base, "-Q", "-t", f"{name}:0:1700000000000"], **run)
    subprocess.run([*base, "-C", "-t", name, "-o", "beginning", "-e"], **run)


def run_kafkajs(bootstrap: str) -> None:
    driver = REPO / "compat_tests" / "kafkajs" / "driver.js"
    name = topic()
    value = "Z29sZGVu"  # base64 "golden"
    ops: list[dict[str, object]] = [{"op": "createTopics", "topics": [{"topic": name}]}]
    for codec in ("none", "gzip"):
        message = {"key": None, "value": value}
        ops.append(
            {"op": "send", "topic": name, "acks": -1, "compression": codec, "messages": [message]}
        )
    ops.append({"op": "fetchTopicOffsets", "topic": name})
    ops.append(
        {"op": "fetchTopicOffsetsByTimestamp", "topic": name, "timestamp": 1_700_000_000_000}
    )
    proc = subprocess.run(
        ["node", str(driver)],
        input=json.dumps({"brokers": [bootstrap], "ops": ops}),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S * 2,
        check=True,
    )
    assert '"results"' in proc.stdout, proc.stdout + proc.stderr


def _poll_until(step: Callable[[], object]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not step():
        assert time.monotonic() < deadline, "no records consumed"


GROUP_TIMING = {"session": 6000, "heartbeat": 100}


def _txn_topics(bootstrap: str) -> tuple[str, str]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    # unrecorded: confluent-kafka makes the input straight at the broker
    del bootstrap
    src, dst = topic(), topic()
    admin = AdminClient({"bootstrap.servers": UPSTREAM})
    for fut in admin.create_topics([NewTopic(src, 1, 1), NewTopic(dst, 1, 1)]).values():
        fut.result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": UPSTREAM})
    producer.produce(src, b"in", b"k")
    assert producer.flush(TIMEOUT_S) == 0
    return src, dst


def _txn_consumer_config(bootstrap: str, src: str) -> dict[str, Any]:
    """The read_committed group consumer of the txn flow, in the two Python clients' spelling."""
    return {
        "bootstrap_servers": bootstrap,
        "group_id": f"golden-{src}",
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "isolation_level": "read_committed",
        "session_timeout_ms": GROUP_TIMING["session"],
        "heartbeat_interval_ms": GROUP_TIMING["heartbeat"],
    }


def txn_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
    from kafka import TopicPartition as TP

    src, dst = _txn_topics(bootstrap)
    consumer = KafkaConsumer(src, **_txn_consumer_config(bootstrap, src))
    _poll_until(lambda: sum(len(b) for b in consumer.poll(timeout_ms=200).values()))
    time.sleep(0.5)  # a heartbeat or two
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"golden-{src}")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(dst, b"out", partition=0).get(TIMEOUT_S)
    offsets = {TP(src, 0): OffsetAndMetadata(1, "", -1)}
    producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
    producer.commit_transaction()
    producer.close()
    consumer.commit({TP(src, 0): OffsetAndMetadata(1, "", -1)})
    consumer.close()


def txn_aiokafka(bootstrap: str) -> None:
    async def main() -> None:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka import TopicPartition as TP

        src, dst = _txn_topics(bootstrap)
        consumer = AIOKafkaConsumer(src, **_txn_consumer_config(bootstrap, src))
        await consumer.start()
        await asyncio.wait_for(consumer.getone(), TIMEOUT_S)
        await asyncio.sleep(0.5)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"golden-{src}")
        await producer.start()
        async with producer.transaction():
            await producer.send_and_wait(dst, b"out", partition=0)
            await producer.send_offsets_to_transaction({TP(src, 0): 1}, f"golden-{src}")
        await producer.stop()
        await consumer.commit({TP(src, 0): 1})
        await consumer.stop()

    asyncio.run(main())


def txn_confluent_kafka(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    src, dst = _txn_topics(bootstrap)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"golden-{src}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": GROUP_TIMING["session"],
            "heartbeat.interval.ms": GROUP_TIMING["heartbeat"],
        }
    )
    consumer.subscribe([src])
    _poll_until(lambda: consumer.poll(0.2) is not None)
    consumer.poll(0.5)  # a heartbeat or two
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"golden-{src}"})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(dst, b"out", partition=0)
    producer.send_offsets_to_transaction(
        [TopicPartition(src, 0, 1)], consumer.consumer_group_metadata(), TIMEOUT_S
    )
    producer.commit_transaction(TIMEOUT_S)
    consumer.commit(offsets=[TopicPartition(src, 0, 1)], asynchronous=False)
    consumer.close()


def txn_kcat(bootstrap: str) -> None:
    exe = shutil.which("kcat")
    assert exe is not None, "kcat is not installed: run scripts/install-client-tools"
    src, _ = _txn_topics(bootstrap)
    args = [exe, "-b", bootstrap, "-G", f"golden-{src}", src, "-c", "1", "-e"]
    args += ["-X", f"heartbeat.interval.ms={GROUP_TIMING['heartbeat']}"]
    args += ["-X", "auto.offset.reset=earliest", "-X", "isolation.level=read_committed"]
    subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, check=True)


def txn_kafkajs(bootstrap: str) -> None:
    """Through ``kafkajs/txn_driver.js``: a group consumer (it commits nothing: kafkajs sends
    OffsetCommit only with autoCommit), then a transaction with sendOffsets."""
    src, dst = _txn_topics(bootstrap)
    driver = REPO / "compat_tests" / "kafkajs" / "txn_driver.js"
    group = f"golden-{src}"
    cmds = [
        {"op": "consume", "group": group, "topics": [src], "count": 1},
        {"op": "producer", "name": "p", "tid": group},
        {"op": "begin", "name": "p"},
        {"op": "send", "name": "p", "topic": dst, "messages": [{"value": "out", "partition": 0}]},
        {
            "op": "sendOffsets",
            "name": "p",
            "group": group,
            "topics": [{"topic": src, "partitions": [{"partition": 0, "offset": "1"}]}],
        },
        {"op": "commit", "name": "p"},
    ]
    proc = subprocess.run(
        ["node", str(driver), bootstrap],
        input="".join(json.dumps(c) + "\n" for c in cmds),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S * 2,
        check=True,
    )
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(answers) == len(cmds) and all("ok" in a for a in answers), proc.stdout + proc.stderr


TXN_RUNNERS: dict[str, Callable[[str], None]] = {
    "kafka_python": txn_kafka_python,
    "aiokafka": txn_aiokafka,
    "confluent_kafka": txn_confluent_kafka,
    "kcat": txn_kcat,
    "kafkajs": txn_kafkajs,
}

RUNNERS: dict[str, Callable[[str], None]] = {
    "kafka_python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "confluent_kafka": run_confluent_kafka,
    "kcat": run_kcat,
    "kafkajs": run_kafkajs,
}
UPSTREAM = ""  # the broker itself, for setup steps that must not be recorded


# -- choosing and writing frames ----------------------------------------------------------


def frame_name(frame: bytes, client: str) -> str | None:
    """The fixture name of a frame worth keeping, or None."""
    supported = served()
    try:
        header, body = decode_request(frame, supported)
    except ProtocolError:
        return None
    api = API_NAMES.get(header.api_key)
    if api is None:
        return None
    name = f"{api}_v{header.api_version}_{client}"
    if header.api_key == 0:
        records = body.topic_data[0].partition_data[0].records or b""
        if len(records) > 22:
            codec = struct.unpack_from(">h", records, 21)[0] & 0x7
            name += f"_{CODEC_NAMES.get(codec, str(codec))}"
    return name


def write_frames(
    frames: list[tuple[str, bytes]], out: Path, keep_existing: bool = False
) -> dict[str, int]:
    kept: dict[str, bytes] = {}
    skipped: dict[str, int] = {}
    for client, frame in frames:
        if client not in CLIENTS:
            continue
        name = frame_name(frame, client)
        if name is None:
            api_key, version = struct.unpack_from(">hh", frame)
            key = f"{client} api {api_key} v{version}"
            skipped[key] = skipped.get(key, 0) + 1
        elif name not in kept and not (keep_existing and (out / f"{name}.hex").exists()):
            kept[name] = frame
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in sorted(kept.items()):
        (out / f"{name}.hex").write_text(frame.hex() + "\n")
        print(f"wrote {name}.hex ({len(frame)} bytes)")
    return skipped


def main() -> None:
    global UPSTREAM
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "tests" / "wire" / "frames"))
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--flows", default="basic,txn", help="basic, txn or both")
    parser.add_argument("--keep-existing", action="store_true", help="write new names only")
    args = parser.parse_args()
    flows = args.flows.split(",")
    frames: list[tuple[str, bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "data").mkdir()
        proc, port = start_broker(Path(tmp) / "data")
        UPSTREAM = f"127.0.0.1:{port}"
        try:
            for client in args.clients.split(","):
                for flow, runners in (("basic", RUNNERS), ("txn", TXN_RUNNERS)):
                    if flow in flows and client in runners:
                        print(f"--- {client} {flow}", flush=True)
                        record_dir = Path(tmp) / f"{client}-{flow}"
                        recorded_run(UPSTREAM, record_dir, runners[client])
                        frames += recorded_requests(record_dir, client)
        finally:
            proc.terminate()
            proc.wait(10)
    skipped = write_frames(frames, Path(args.out), args.keep_existing)
    for key, n in sorted(skipped.items()):
        print(f"skipped {n} frame(s): {key}")


if __name__ == "__main__":
    os.environ.setdefault("KAFKAJS_NO_PARTITIONER_WARNING", "1")
    main()
