"""Whether a sink task received its whole input, or Spark cut it short.

Theory of operation. PySpark runs a Python data source's `write` as a mapInArrow function in a
Python worker: the JVM streams the task's rows to the worker's socket as one Arrow IPC stream.
A task whose input ends normally gets the stream's end-of-stream marker, and the JVM then
waits for the worker's output (the commit message) before it sends anything more: the socket
holds no further byte. When the JVM side of the task fails mid-stream (an exception upstream,
a FetchFailed shuffle read, a cancelled task on `query.stop()`), the JVM shuts its end of the
socket down without the end-of-stream marker, and PyArrow treats that end of file, at a
message boundary, as a normal end of stream: the writer's input iterator simply stops. (Both
behaviours were observed on PySpark 4.3.0: `compat_tests/test_pipeline_failures.py` checks
them on every run.)

So once its input iterator is exhausted, a task looks at the worker's input socket without
reading from it: at end of file, the input was cut short and the task must not commit; not
readable, the JVM is waiting for the task's output and the input was whole; PySpark's
END_OF_STREAM code next (a worker protocol that sends it right after the input) means whole
too. Anything else (unexpected bytes) is refused: the task fails rather than guess.

The socket is the `message_receiver` of PySpark's `worker.invoke_udf`, found on the call stack
(the data source API gives a writer no handle on it). A PySpark whose worker has none is
refused: the sink cannot tell a whole input from a cut one there. So is a worker started
without PySpark's daemon (spark.python.use.daemon=false): its input is a socket.makefile()
pair with no file descriptor to poll.
"""

from __future__ import annotations

import select
import sys
from typing import BinaryIO

END_OF_STREAM = b"\xff\xff\xff\xfc"  # PySpark's SpecialLengths.END_OF_STREAM (-4)


class InputCutShort(RuntimeError):
    """The JVM ended the task's input without its end-of-stream marker."""


def worker_input() -> BinaryIO:
    """The Python worker's input stream from the JVM (call from within `write`)."""
    frame = sys._getframe(1)
    while frame is not None:
        receiver = frame.f_locals.get("message_receiver")
        infile = getattr(receiver, "_infile", None)
        if infile is not None and hasattr(infile, "peek") and hasattr(infile, "fileno"):
            _check_pollable(infile)
            return infile  # type: ignore[no-any-return]
        frame = frame.f_back  # type: ignore[assignment]
    raise RuntimeError(
        "the kafkad sink cannot find the Python worker's input socket: this PySpark's worker"
        " protocol is not supported (pin pyspark 4.3.0), so a task cut short could not be told"
        " from a complete one"
    )


def _check_pollable(infile: BinaryIO) -> None:
    """A worker started without PySpark's daemon (spark.python.use.daemon=false) reads the JVM
    through socket.makefile(), a BufferedRWPair whose fileno() raises: the socket cannot be
    polled, so a cut input could not be told from a whole one."""
    try:
        infile.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        raise RuntimeError(
            "the kafkad sink cannot look at the Python worker's input socket: workers started"
            " without PySpark's daemon (spark.python.use.daemon=false) are not supported, since"
            " a task cut short could not be told from a complete one; leave"
            " spark.python.use.daemon at its default (true)"
        ) from None


def check_whole(infile: BinaryIO) -> None:
    """Raise InputCutShort unless the JVM sent this task's whole input (see above). Call only
    once the input iterator is exhausted."""
    poller = select.poll()  # not select(): a worker may hold fds past FD_SETSIZE
    poller.register(infile.fileno(), select.POLLIN)
    if not poller.poll(0):
        return  # the JVM waits for our output: it sent the end-of-stream marker
    ahead = infile.peek(4)  # type: ignore[attr-defined]
    if ahead[:4] == END_OF_STREAM:
        return  # a JVM that signals its end right after the input (older PySpark workers)
    if not ahead:
        raise InputCutShort(
            "the task's input ended without Spark's end-of-stream marker (the task failed,"
            " was cancelled, or its shuffle input was lost): its transaction is aborted and"
            " Spark's retry or the query's restart writes the rows"
        )
    raise InputCutShort(f"unexpected bytes {bytes(ahead[:8]).hex()} after the task's input")
