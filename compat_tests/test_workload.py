"""The randomized transactional workload (``compat_tests/workload/``), short profile: three
transactional producers (confluent-kafka x2, kafka-python), two consume-transform-produce
copiers in a group, read_committed readers joining and leaving, while the broker is killed with
SIGKILL, crashes at the transaction coordinator's crash points, answers retriable errors, stalls
and drops connections, and producers are killed mid-transaction; then the history checker
must find nothing. Seed: ``KAFKAD_WORKLOAD_SEED`` (default 1); longer runs:
``python -m compat_tests.workload --profile long`` (README)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from compat_tests._support import EXTERNAL
from compat_tests.workload.profiles import PROFILES
from compat_tests.workload.runner import Run

SEED = int(os.environ.get("KAFKAD_WORKLOAD_SEED", "1"))
DURATION_S = float(os.environ.get("KAFKAD_WORKLOAD_SECONDS", "30"))


@pytest.mark.timeout(int(DURATION_S) + 200)
def test_workload_short_profile_is_clean(tmp_path: Path) -> None:
    run = Run(SEED, PROFILES["short"], tmp_path, EXTERNAL, duration_s=DURATION_S)
    try:
        report = run.run()
    finally:
        run.stop_broker()
    print(report.summary())
    assert report.clean, f"seed {SEED}, history {run.history.path}\n{report.summary()}"
    assert report.counts["txns.committed"] > 20, report.summary()
    assert report.counts["polls"] > 0, report.summary()
    assert report.counts["copies_visible"] > 0, report.summary()
    if EXTERNAL is None:
        assert report.counts["run.injected_faults"] > 0, report.summary()


@pytest.mark.timeout(int(DURATION_S) + 200)
def test_workload_with_consumer_protocol_copiers_is_clean(tmp_path: Path) -> None:
    """The short profile's faults with both copiers on the KIP-848 consumer protocol."""
    run = Run(SEED, PROFILES["kip848"], tmp_path, EXTERNAL, duration_s=DURATION_S)
    try:
        report = run.run()
    finally:
        run.stop_broker()
    print(report.summary())
    assert report.clean, f"seed {SEED}, history {run.history.path}\n{report.summary()}"
    assert report.counts["copies_visible"] > 0, report.summary()


@pytest.mark.timeout(int(DURATION_S) + 200)
def test_workload_with_tv2_producers_and_copier_is_clean(tmp_path: Path) -> None:
    """The short profile's faults with two producers and a copier of kafkad's raw-protocol
    producer in Java 4.x's transaction-version-2 flow, beside confluent-kafka and
    kafka-python."""
    from proxy.registry import advertised

    if EXTERNAL is None and advertised()[26][1] < 5:
        pytest.skip("kafkad offers no EndTxn v5 yet: no transaction version 2")
    run = Run(SEED, PROFILES["tv2"], tmp_path, EXTERNAL, duration_s=DURATION_S)
    try:
        report = run.run()
    finally:
        run.stop_broker()
    print(report.summary())
    assert report.clean, f"seed {SEED}, history {run.history.path}\n{report.summary()}"
    assert report.counts["txns.committed"] > 20, report.summary()
    assert report.counts["copies_visible"] > 0, report.summary()
