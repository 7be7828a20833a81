"""proxy/listen_sockets.py: the listening sockets of a client listener, at start and at runtime."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import trio
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from proxy.config import load_config
from proxy.listen_sockets import bind_sockets
from proxy.server import Server
from tests.proxy.harness import RawClient


def _dual(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """``name`` resolves to the IPv4 and the IPv6 loopback (as ``localhost`` does where
    /etc/hosts names both)."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host == name:
            return [*real("127.0.0.1", port, *args, **kwargs), *real("::1", port, *args, **kwargs)]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_port_0_binds_every_address_on_one_port(monkeypatch: pytest.MonkeyPatch) -> None:
    # Kafka binds one socket, so one port, and advertises it; a host with several addresses
    # must not listen on a different ephemeral port per address
    _dual(monkeypatch, "dual.test")
    socks = bind_sockets("dual.test", 0)
    try:
        assert sorted(s.family for s in socks) == [socket.AF_INET, socket.AF_INET6]
        assert len({s.getsockname()[1] for s in socks}) == 1
    finally:
        for s in socks:
            s.close()


async def test_port_0_listener_answers_on_each_address_at_its_advertised_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _dual(monkeypatch, "dual.test")
    cfg = load_config(
        listen=None,
        advertise=None,
        data_dir="memory://",
        config_file=None,
        overrides={"listeners": "PLAINTEXT://dual.test:0"},
        environ={},
    )
    server = Server(cfg)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        try:
            assert server.broker is not None
            _, port = server.broker.advertised_address("PLAINTEXT")
            for ip in ("127.0.0.1", "::1"):
                c = RawClient(await trio.open_tcp_stream(ip, port))
                try:
                    assert await c.request(ApiVersionsRequest()) is not None
                finally:
                    await c.aclose()
        finally:
            server.stop()


def test_an_address_given_twice_is_bound_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # getaddrinfo repeats an address /etc/hosts lists twice: at port 0 the second may not take
    # the first's port again, and at a fixed port it could not either
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host == "twice.test":
            return 2 * real("127.0.0.1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    socks = bind_sockets("twice.test", 0)
    try:
        assert [s.getsockname()[0] for s in socks] == ["127.0.0.1"]
    finally:
        for s in socks:
            s.close()
