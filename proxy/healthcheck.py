"""``kafkad healthcheck``: is a broker at HOST:PORT answering Kafka requests?

Sends one ApiVersions v0 request over a plain blocking socket and checks the reply's
correlation id and error code; exit 0 if healthy, 1 if not (with one line on stderr). Written
by hand, not with kio, so that it stays a few bytes on the wire and fast enough for a
container ``HEALTHCHECK`` every few seconds.
"""

from __future__ import annotations

import socket
import struct

API_VERSIONS = 18
_CORRELATION_ID = 0x6B616664  # "kafd"
_CLIENT_ID = b"kafkad-healthcheck"


def api_versions_request() -> bytes:
    body = struct.pack(">hhih", API_VERSIONS, 0, _CORRELATION_ID, len(_CLIENT_ID)) + _CLIENT_ID
    return struct.pack(">i", len(body)) + body


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def check(host: str, port: int, timeout_s: float) -> str | None:
    """None if the broker answered ApiVersions without an error, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(api_versions_request())
            (size,) = struct.unpack(">i", _read_exactly(sock, 4))
            if size < 6:
                return f"{host}:{port}: a {size}-byte reply is too short"
            correlation_id, error_code = struct.unpack(">ih", _read_exactly(sock, 6))
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or exc}"
    if correlation_id != _CORRELATION_ID:
        return f"{host}:{port}: the reply has correlation id {correlation_id}"
    if error_code != 0:
        return f"{host}:{port}: ApiVersions answered error code {error_code}"
    return None
