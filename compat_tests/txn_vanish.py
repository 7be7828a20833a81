"""A transactional producer of one stock Python client that vanishes mid-transaction, run as a
subprocess by txn_support.check_vanished_transaction_is_aborted:
``python -u txn_vanish.py CLIENT BOOTSTRAP TOPIC TRANSACTIONAL_ID TXN_TIMEOUT_MS``.

It begins a transaction, writes b"vanished-0".."vanished-2" to partition 0, waits for their
acknowledgement, prints ``sent`` and then waits to be killed: it never ends the transaction.
"""

from __future__ import annotations

import asyncio
import sys
import threading

VALUES = [b"vanished-%d" % i for i in range(3)]


def run_kafka_python(bootstrap: str, topic: str, tid: str, timeout_ms: int) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=tid, transaction_timeout_ms=timeout_ms
    )
    p.init_transactions()
    p.begin_transaction()
    for f in [p.send(topic, v, partition=0) for v in VALUES]:
        f.get(timeout=15)
    print("sent", flush=True)
    threading.Event().wait()


async def run_aiokafka(bootstrap: str, topic: str, tid: str, timeout_ms: int) -> None:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=tid, transaction_timeout_ms=timeout_ms
    )
    await p.start()
    await p.begin_transaction()
    for v in VALUES:
        await p.send_and_wait(topic, v, partition=0)
    print("sent", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    client, bootstrap, topic, tid, timeout_ms = sys.argv[1:6]
    if client == "kafka-python":
        run_kafka_python(bootstrap, topic, tid, int(timeout_ms))
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(bootstrap, topic, tid, int(timeout_ms)))
    else:
        raise SystemExit(f"unknown client {client}")


if __name__ == "__main__":
    main()
