"""kafkad/client/connection.py against a loopback socket that is no Kafka broker."""

from __future__ import annotations

import socket
import threading

import pytest

from kafkad.client.connection import Connection
from kafkad.client.errors import Unreachable
from kafkad.client.security import from_properties


def test_a_failed_handshake_closes_the_socket_at_once() -> None:
    # The peer answers ApiVersions with HTTP bytes: Connection() fails, and its socket must be
    # closed then, not left open until the garbage collector finds it (the failure's
    # traceback holds the half-built Connection).
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    seen: list[bytes] = []

    def answer_like_http() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            conn.settimeout(5)
            try:
                seen.append(conn.recv(1))  # b"" once the client has closed
            except TimeoutError:
                seen.append(b"timeout")

    thread = threading.Thread(target=answer_like_http, daemon=True)
    thread.start()
    try:
        with pytest.raises(Exception) as failed:
            Connection(f"127.0.0.1:{port}", 5)
        thread.join(10)
        assert seen == [b""], "the client's socket stayed open"
        del failed
    finally:
        server.close()


def test_tls_to_a_plaintext_listener_says_what_to_check() -> None:
    # A plaintext Kafka listener reads the ClientHello as a frame size far over its limit and
    # closes the connection: the TLS handshake ends in an EOF, and the line says why that may be.
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def hang_up() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(1024)

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        security = from_properties({"security.protocol": "SSL"})
        with pytest.raises(Unreachable) as failed:
            Connection(f"127.0.0.1:{port}", 5, security=security)
        thread.join(10)
        text = str(failed.value)
        assert text.startswith(f"TLS handshake with 127.0.0.1:{port} failed: ")
        assert "(is it an SSL or SASL_SSL listener? a plaintext one closes" in text
    finally:
        server.close()
