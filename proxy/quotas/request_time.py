"""The time a request's task spends handling it, for ``request_percentage`` (Kafka's
``ClientRequestQuotaManager``: a client's share of the request handler threads' time).

Kafka charges ``requestThreadTimeNanos``: the time a request handler thread worked on the
request, not the time it waited in purgatory (a long-polling Fetch, an acks=all Produce). kafkad
serves a connection's requests one at a time in the connection's task, so the equivalent is the
time that task ran while handling the request: a trio ``Instrument`` adds up the length of each
step of the tasks that are handling a request, and a parked task (a Fetch waiting for data, a
Produce waiting for its fsync) runs no step and so is charged nothing while it waits.

Deviation: work a request hands to another task or thread (the storage's fsync threads, a
coordinator's background task) is not charged to it; Kafka likewise charges only the handler
thread. The instrument is installed when the first request quota is set (Kafka's quota types
only grow until a restart, so it stays), so a broker without request quotas pays nothing.
"""

from __future__ import annotations

import time

import trio


class TaskClock(trio.abc.Instrument):
    """Per-task time spent running (seconds), for the tasks between ``start`` and ``elapsed``."""

    def __init__(self) -> None:
        self._step_started = time.perf_counter()
        self._spent: dict[trio.lowlevel.Task, float] = {}

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._step_started = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task in self._spent:
            self._spent[task] += time.perf_counter() - self._step_started

    def start(self) -> None:
        """The current task starts handling a request: its time counts from now."""
        self._spent[trio.lowlevel.current_task()] = -(time.perf_counter() - self._step_started)

    def elapsed(self) -> float:
        """The current task's running time since ``start`` (0.0 if it never started)."""
        task = trio.lowlevel.current_task()
        spent = self._spent.get(task)
        if spent is None:
            return 0.0
        return spent + time.perf_counter() - self._step_started

    def stop(self) -> float:
        """``elapsed``, and the task is no longer followed."""
        spent = self.elapsed()
        self._spent.pop(trio.lowlevel.current_task(), None)
        return spent
