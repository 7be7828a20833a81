"""The session's broker dies in the first test; the second is told so, with its log."""

import os
import signal
import time


def test_kills_the_session_broker(kafkad_broker):
    os.kill(kafkad_broker.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while kafkad_broker.alive():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_after_the_broker_died(kafkad_broker):
    raise AssertionError("not reached: the fixture fails first")
