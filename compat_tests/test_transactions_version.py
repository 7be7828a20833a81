"""The ``transaction.version`` the compat broker runs at: 2, the level Kafka 4 formats a new
cluster with, unless ``KAFKAD_FEATURE`` formats it at another one. ``make test`` runs the stock
clients' transaction tests a second time with ``KAFKAD_FEATURE=transaction.version=0``; this
test, run with them, checks the level they ran at (ApiVersions v4's finalized features, as
``kafka-features.sh describe`` reads them)."""

from __future__ import annotations

import os

import pytest

from compat_tests._support import EXTERNAL
from kafkad.client.connection import Connection
from proxy.features import parse_feature

pytestmark = pytest.mark.timeout(30)


def asked_level() -> int:
    levels = dict(
        parse_feature(item)
        for item in os.environ.get("KAFKAD_FEATURE", "").split(",")
        if item.strip()
    )
    return levels.get("transaction.version", 2)


def test_the_broker_runs_at_the_level_asked_for(bootstrap: str) -> None:
    if EXTERNAL and asked_level() != 2:
        pytest.skip("KAFKAD_FEATURE formats kafkad's own data dir, not an external broker's")
    conn = Connection(bootstrap, 10.0)
    try:
        resp = conn.request(
            18, (4, 4), {"client_software_name": "kafkad-tests", "client_software_version": "1"}
        )
    finally:
        conn.close()
    finalized = {f.name: int(f.max_version_level) for f in resp.finalized_features}
    supported = {f.name: (int(f.min_version), int(f.max_version)) for f in resp.supported_features}
    assert supported["transaction.version"] == (0, 2)
    assert finalized.get("transaction.version", 0) == asked_level()  # level 0 is not listed
