"""A module-scoped fixture of throwaway TLS material (``kafkad certs``), for the TLS test modules.

``certs = cert_dir_fixture("certs")`` in a test module gives its tests a fresh directory with a CA,
a server key + certificate and a client certificate (proxy.certs.write_certs); each fixture made so
has its own CA, so two of them stand for "another CA".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from proxy.certs import write_certs


def cert_dir_fixture(name: str) -> Callable[..., Path]:
    @pytest.fixture(scope="module")
    def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
        d = tmp_path_factory.mktemp(name)
        write_certs(d)
        return d

    return cert_dir
