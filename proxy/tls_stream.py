"""A TLS stream over ``ssl.MemoryBIO`` that hands out everything decrypted so far (server
side; client side for ``kafkad proxy`` toward a TLS upstream).

Why not ``trio.SSLStream``: its ``receive_some`` returns one TLS record per call (OpenSSL's
``SSL_read`` stops at a record boundary), with a scheduler checkpoint and a cancel scope around
each. librdkafka writes a produce request as one TLS record per buffer segment (about 1.4 KB
each for 1 KiB values), so a 1 MiB request cost ~700 trips through the broker's read loop and
TLS produce ran at a fifth of plaintext. Here one ``receive_some`` decrypts every whole record
already received, up to ``max_bytes``, and reads the socket only when none is left.

Theory of operation: the ``ssl.SSLObject`` reads ciphertext from ``_incoming`` and writes
ciphertext to ``_outgoing``; this class moves bytes between those BIOs and the transport.
``receive_some`` first drains plaintext; on ``SSLWantReadError`` with nothing drained it sends
whatever OpenSSL queued (TLS 1.3 post-handshake messages, alerts) and waits for more ciphertext.
``send_all`` encrypts the whole buffer into ``_outgoing`` and writes it under a FIFO lock, so
two senders' records never interleave. Renegotiation is refused (``OP_NO_RENEGOTIATION`` on the
context, TLSv1.2 only; TLS 1.3 has none), so a write never has to wait for a read. A peer's
close_notify, or the transport's EOF, ends the stream (``b""``); any other TLS error breaks it
(``trio.BrokenResourceError`` whose ``__cause__`` is the ``ssl`` error, as trio's stream does).
"""

from __future__ import annotations

import contextlib
import ssl

import trio

_RECEIVE_SIZE = 256 * 1024  # ciphertext read from the socket at a time
_CLOSE_NOTIFY_S = 1.0  # at most this long to write close_notify at close


class TlsStream(trio.abc.Stream):
    def __init__(
        self,
        transport: trio.abc.Stream,
        context: ssl.SSLContext,
        *,
        server_side: bool = True,
        server_hostname: str | None = None,
    ) -> None:
        """``server_side=False`` (``kafkad proxy`` toward a TLS upstream) makes it a client
        that checks ``server_hostname`` if the context says so."""
        self.transport_stream = transport
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(
            self._incoming,
            self._outgoing,
            server_side=server_side,
            server_hostname=None if server_side else server_hostname,
        )
        self._send_lock = trio.StrictFIFOLock()
        self._eof = False

    def getpeercert(self, binary_form: bool = True) -> bytes | None:
        return self._tls.getpeercert(binary_form=True)

    async def _flush(self) -> None:
        if self._outgoing.pending:
            async with self._send_lock:
                data = self._outgoing.read()
                if data:
                    await self.transport_stream.send_all(data)

    async def _fill(self) -> bool:
        """Read ciphertext from the socket into the TLS object; False at the transport's EOF."""
        data = await self.transport_stream.receive_some(_RECEIVE_SIZE)
        if not data:
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True

    async def do_handshake(self) -> None:
        while True:
            try:
                self._tls.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError as exc:
                # the alert OpenSSL queued tells the client why; best effort
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await self._flush()
                raise trio.BrokenResourceError(str(exc)) from exc
            else:
                await self._flush()
                return
            await self._flush()
            if not await self._fill():
                raise trio.BrokenResourceError("connection closed during the handshake")

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        limit = _RECEIVE_SIZE if max_bytes is None else max_bytes
        while True:
            if self._eof:
                await trio.lowlevel.checkpoint()
                return b""
            chunks: list[bytes] = []
            got = 0
            try:
                while got < limit:
                    chunk = self._tls.read(limit - got)
                    if not chunk:  # the peer's close_notify (CPython answers b"", no error)
                        self._eof = True
                        break
                    chunks.append(chunk)
                    got += len(chunk)
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                self._eof = True
            except ssl.SSLError as exc:
                raise trio.BrokenResourceError(str(exc)) from exc
            if chunks:
                await trio.lowlevel.checkpoint()
                return b"".join(chunks)
            if self._eof:
                continue
            if self._incoming.eof:  # OpenSSL wants more than the transport will ever send
                self._eof = True
                continue
            await self._flush()
            await self._fill()  # at EOF, the next read reports it (close_notify or not)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            self._tls.write(data)
        except ssl.SSLError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc
        await self._flush()

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport_stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        """Send close_notify, then close the transport. As Kafka's SslTransportLayer.close,
        the alert is sent even when the close is forced (trio.aclose_forcefully, as the
        connection closes): shielded, for at most _CLOSE_NOTIFY_S; the peer's answer is not
        awaited."""
        with contextlib.suppress(ssl.SSLError, ValueError):
            self._tls.unwrap()  # queues close_notify (SSLWantReadError: no answer awaited)
        try:
            with trio.CancelScope(shield=True, deadline=trio.current_time() + _CLOSE_NOTIFY_S):
                await self._flush()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await self.transport_stream.aclose()
