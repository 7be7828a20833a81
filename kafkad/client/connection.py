"""One blocking connection to one broker: framing, ApiVersions, request/response.

Theory of operation: a request is sent and its response read before the next one (no
pipelining; the CLI never needs it). On connect the client asks ApiVersions (v3, falling
back to the version a KIP-511 answer names) and remembers each API's range; ``request``
then picks the highest version inside both the broker's range and the range the caller's
dict shape is written for (``kafkad.client.build``), so one code path serves kafkad and
Apache Kafka of any version that shares a version with us.
"""

from __future__ import annotations

import io
import socket
import ssl
import struct
from collections.abc import Mapping
from typing import Any

from kio.serial import entity_reader, entity_writer

from kafkad.client.build import build, request_class, response_class
from kafkad.client.errors import ClientError, Unreachable
from kafkad.client.security import Security, authenticate
from wire.errors import FramingError
from wire.framing import FrameDecoder, Want
from wire.headers import RequestHeader, request_header

__all__ = ["Connection", "split_host_port"]

API_VERSIONS = 18
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


def split_host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ClientError(f"{address!r} is not HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


class Connection:
    def __init__(
        self,
        address: str,
        timeout: float,
        client_id: str = "kafkad-cli",
        security: Security | None = None,
    ) -> None:
        self.address = address
        self.timeout = timeout
        self.client_id = client_id
        security = security or Security()
        host, port = split_host_port(address)
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            why = exc.strerror or str(exc) or type(exc).__name__
            raise Unreachable(f"cannot reach a broker at {address}: {why}") from exc
        sock.settimeout(timeout)
        self._sock: socket.socket = sock
        if security.tls is not None:
            try:
                hostname = host if security.check_hostname else None
                if not security.check_hostname:
                    security.tls.check_hostname = False
                self._sock = security.tls.wrap_socket(sock, server_hostname=hostname)
            except (ssl.SSLError, OSError) as exc:
                sock.close()
                # a plaintext listener reads the ClientHello as a huge frame and hangs up
                hint = (
                    " (is it an SSL or SASL_SSL listener? a plaintext one closes the "
                    "connection on a TLS handshake)"
                    if isinstance(exc, (ssl.SSLEOFError, ConnectionResetError))
                    else ""
                )
                raise Unreachable(f"TLS handshake with {address} failed: {exc}{hint}") from exc
        self._decoder = FrameDecoder()
        self._next_id = 1
        self.versions: dict[int, tuple[int, int]] = {}
        self._plaintext = security.protocol == "PLAINTEXT"
        try:
            self._negotiate()
            if security.mechanism is not None:
                authenticate(security, self._exchange, address)
        except BaseException:
            self._sock.close()
            raise

    def close(self) -> None:
        self._sock.close()

    def _negotiate(self) -> None:
        data = {"client_software_name": "kafkad-cli", "client_software_version": "1"}
        resp = self._exchange(API_VERSIONS, 3, data)
        if resp.error_code == 35:  # UNSUPPORTED_VERSION: retry at the version it names
            high = max(
                (k.max_version for k in resp.api_keys if k.api_key == API_VERSIONS), default=0
            )
            resp = self._exchange(API_VERSIONS, min(int(high), 3), data)
        if resp.error_code:
            raise ClientError(f"{self.address} refused ApiVersions (error code {resp.error_code})")
        self.versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys
        }

    def version_for(self, api_key: int, low: int, high: int) -> int:
        """The highest version in both [low, high] and the broker's range."""
        theirs = self.versions.get(api_key)
        if theirs is None or theirs[1] < low or theirs[0] > high:
            name = request_class(api_key, low).__name__.removesuffix("Request")
            offers = f"versions {theirs[0]}-{theirs[1]}" if theirs else "none"
            raise ClientError(
                f"the broker at {self.address} does not support {name} (API {api_key}) "
                f"in versions {low}-{high} (UNSUPPORTED_VERSION: it offers {offers})"
            )
        return min(high, theirs[1])

    def request(self, api_key: int, versions: tuple[int, int], data: Mapping[str, Any]) -> Any:
        return self._exchange(api_key, self.version_for(api_key, *versions), data)

    def request_raw(
        self, api_key: int, versions: tuple[int, int], data: Mapping[str, Any]
    ) -> bytes:
        """The response body undecoded (for a response kio cannot read: see txn_state.py)."""
        version = self.version_for(api_key, *versions)
        frame = self._exchange(api_key, version, data, raw=True)
        assert isinstance(frame, bytes)
        return frame[4 + (1 if response_class(api_key, version).__flexible__ else 0) :]

    def _exchange(
        self, api_key: int, version: int, data: Mapping[str, Any], raw: bool = False
    ) -> Any:
        cls = request_class(api_key, version)
        body = io.BytesIO()
        entity_writer(cls)(body, build(cls, data))
        cid = self._next_id
        self._next_id += 1
        head = request_header(
            RequestHeader(api_key, version, cid, self.client_id), cls.__flexible__
        )
        payload = head + body.getvalue()
        try:
            self._sock.sendall(_SIZE.pack(len(payload)) + payload)
            frame = self._read_frame()
        except TimeoutError as exc:
            raise ClientError(f"no answer from {self.address} within {self.timeout:g} s") from exc
        except OSError as exc:
            # an SSL listener drops a plaintext request, a SASL one anything but the handshake
            hint = (
                " (if it is an SSL or SASL listener, give --command-config with "
                "security.protocol and its settings)"
                if self._plaintext and isinstance(exc, ConnectionResetError)
                else ""
            )
            raise Unreachable(f"lost the connection to {self.address}: {exc}{hint}") from exc
        except FramingError as exc:  # e.g. an HTTP server or a TLS listener on that port
            raise Unreachable(
                f"{self.address} does not answer like a Kafka broker (plaintext): {exc}"
            ) from exc
        (got,) = _CORRELATION.unpack_from(frame, 0)
        if got != cid:
            raise ClientError(f"{self.address} answered request {got}, expected {cid}")
        if raw:
            return frame
        rcls = response_class(api_key, version)
        pos = 4 + (1 if rcls.__flexible__ and api_key != API_VERSIONS else 0)
        try:
            value, _size = entity_reader(rcls)(frame, pos)
        except Exception as exc:
            if api_key == API_VERSIONS and version:
                return self._exchange_v0_fallback(frame)
            raise ClientError(f"cannot decode the answer of {self.address}: {exc}") from exc
        return value

    def _exchange_v0_fallback(self, frame: bytes) -> Any:
        value, _ = entity_reader(response_class(API_VERSIONS, 0))(frame, 4)
        return value

    def _read_frame(self) -> bytes:
        while True:
            frame = self._decoder.next_frame()
            if isinstance(frame, bytes):
                return frame
            if frame is Want.EOF:
                raise ConnectionResetError("the broker closed the connection")
            chunk = self._sock.recv(1 << 20)
            self._decoder.feed(chunk)
            if not chunk and self._decoder.buffered == 0:
                raise ConnectionResetError("the broker closed the connection")
