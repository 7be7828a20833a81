"""Telling a whole sink input from one Spark cut short, on a real socket pair (no Spark)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import BinaryIO

import pytest

from pipeline.end_of_input import InputCutShort, check_whole, worker_input


@pytest.fixture
def channel() -> Iterator[tuple[socket.socket, BinaryIO]]:
    """(the JVM's end, the worker's buffered input) as PySpark's daemon opens it."""
    jvm, worker = socket.socketpair()
    infile = os.fdopen(os.dup(worker.fileno()), "rb", 65536)
    try:
        yield jvm, infile
    finally:
        infile.close()
        worker.close()
        jvm.close()


def test_jvm_waiting_for_the_answer_means_whole(channel: tuple[socket.socket, BinaryIO]) -> None:
    jvm, infile = channel
    jvm.sendall(b"\xff\xff\xff\xff\x00\x00\x00\x00")  # Arrow's end-of-stream marker
    assert infile.read(8)  # consumed by the Arrow reader
    check_whole(infile)  # nothing more readable: the JVM waits for the commit message
    check_whole(infile)  # and looking did not consume anything


def test_end_of_stream_code_next_means_whole(channel: tuple[socket.socket, BinaryIO]) -> None:
    jvm, infile = channel
    jvm.sendall(b"\xff\xff\xff\xfc")
    check_whole(infile)
    assert infile.read(4) == b"\xff\xff\xff\xfc"  # left for the worker's own check


def test_jvm_closing_the_stream_means_cut(channel: tuple[socket.socket, BinaryIO]) -> None:
    jvm, infile = channel
    jvm.shutdown(socket.SHUT_WR)  # what the JVM does when the task's input fails
    with pytest.raises(InputCutShort, match="without Spark's end-of-stream marker"):
        check_whole(infile)


def test_unexpected_bytes_are_refused(channel: tuple[socket.socket, BinaryIO]) -> None:
    jvm, infile = channel
    jvm.sendall(b"\x00\x00\x00\x01")
    with pytest.raises(InputCutShort, match="unexpected bytes 00000001"):
        check_whole(infile)


def test_outside_a_pyspark_worker_the_socket_is_not_found() -> None:
    with pytest.raises(RuntimeError, match="worker protocol is not supported"):
        worker_input()


def test_the_workers_receiver_is_found_up_the_stack(
    channel: tuple[socket.socket, BinaryIO],
) -> None:
    _, infile = channel

    class Receiver:  # PySpark's SparkSocketMessageReceiver keeps the stream as _infile
        _infile = infile

    def invoke_udf(message_receiver: Receiver) -> BinaryIO:
        return (lambda: worker_input())()

    assert invoke_udf(Receiver()) is infile


def test_a_worker_without_the_daemon_is_refused_by_name() -> None:
    # spark.python.use.daemon=false: worker.py's input is sock.makefile("rwb"), whose
    # fileno() raises; before, every sink task with rows failed on an UnsupportedOperation
    jvm, worker = socket.socketpair()
    infile = worker.makefile("rwb", 65536)
    try:

        class Receiver:
            _infile = infile

        def invoke_udf(message_receiver: Receiver) -> BinaryIO:
            return worker_input()

        with pytest.raises(RuntimeError, match=r"spark\.python\.use\.daemon=false"):
            invoke_udf(Receiver())
    finally:
        infile.close()
        worker.close()
        jvm.close()
