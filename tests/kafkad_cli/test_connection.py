"""kafkad/client/connection.py against a loopback socket that is no Kafka broker."""

from __future__ import annotations

import socket
import threading

import pytest

from kafkad.client.connection import Connection


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
