"""A connection's reads and writes: trio's stream for TLS, the raw socket for plaintext.

Why the plaintext path bypasses ``trio.SocketStream``: a request/response client (a
transactional producer, one record in flight at acks=all) costs the broker a read, a handler
and a write per request, and trio's stream wraps each read and write in a scheduler checkpoint,
a conflict detector and, for the write, a shielded cancel scope with a deadline. Under a
small-transaction load those wrappers were a fifth of the broker's busy time (issue 20).

``SocketIO`` works on the socket's file descriptor (non-blocking, as trio made it):

* ``receive`` first waits until the socket is readable (``trio.lowlevel.wait_readable``, the
  one scheduler trip per read), then reads what is there into a reused buffer (perf-notes
  rule 3) and feeds it to the frame decoder, which copies it before anything is awaited. The
  buffer is one per trio run, shared by every plaintext connection: one per connection would
  keep 256 KiB resident for each idle client (1000 idle connections: 250 MB). Waiting first
  skips the read that would fail with EAGAIN: after a reply the client has almost never sent
  its next request yet, and when it has (pipelining) the wait returns at the next scheduler
  pass, which is the checkpoint a busy connection owes the others anyway. The idle timeout is
  the caller's (a deadline on the connection's scope, not a cancel scope per read).
* ``send`` writes at once; only what the kernel did not take goes through
  ``wait_writable`` under the write deadline (``WriteTimedOut`` past it), after the caller's
  ``before_wait``. Nothing is awaited when the whole reply fits in the socket buffer, which is
  the usual case.

OS errors of a broken connection surface as ``trio.BrokenResourceError`` (what the stream
raised), so ``serve_connection`` handles both kinds alike. ``StreamIO`` is the same interface
over any ``trio.abc.Stream`` (the TLS stream).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import trio

from wire.framing import FrameDecoder

READ_SIZE = 256 * 1024

_READ_BUFFER: trio.lowlevel.RunVar[memoryview] = trio.lowlevel.RunVar("kafkad_read_buffer")


def _read_buffer() -> memoryview:
    """This trio run's read buffer (a run is one thread: no two reads use it at once)."""
    try:
        return _READ_BUFFER.get()
    except LookupError:
        view = memoryview(bytearray(READ_SIZE))
        _READ_BUFFER.set(view)
        return view


class WriteTimedOut(Exception):
    """A reply could not be written within ``write_s``: part of a frame may be out."""


class StreamIO:
    """Reads and writes through a trio stream (TLS)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream

    async def receive(self, decoder: FrameDecoder) -> None:
        """Feed the next bytes (``b""`` at EOF) to ``decoder``."""
        decoder.feed(await self.stream.receive_some(READ_SIZE))

    async def send(
        self, data: bytes, write_s: float, before_wait: Callable[[], None] | None = None
    ) -> None:
        """Send ``data``; ``before_wait`` is called before anything that may wait (here
        always: ``send_all`` may checkpoint after sending bytes)."""
        if before_wait is not None:
            before_wait()
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + write_s
            await self.stream.send_all(data)
        if scope.cancelled_caught:
            raise WriteTimedOut


class SocketIO:
    """Reads and writes on a plaintext socket's descriptor, trio waiting only when it must."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.fd = stream.socket.fileno()
        self._view = _read_buffer()

    async def receive(self, decoder: FrameDecoder) -> None:
        fd, view = self.fd, self._view
        while True:
            await trio.lowlevel.wait_readable(fd)
            try:
                n = os.readv(fd, (view,))
            except BlockingIOError:  # woken spuriously
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(f"read failed: {exc!r}") from exc
            decoder.feed(view[:n])  # copied at once; n == 0: the peer closed its side
            return

    async def send(
        self, data: bytes, write_s: float, before_wait: Callable[[], None] | None = None
    ) -> None:
        """Send ``data``; ``before_wait`` is called before the first wait for the socket (only
        when the kernel did not take it all: the peer may already hold whole replies of it)."""
        fd = self.fd
        try:
            sent = os.write(fd, data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            raise trio.BrokenResourceError(f"write failed: {exc!r}") from exc
        if sent == len(data):
            return
        if before_wait is not None:
            before_wait()
        rest = memoryview(data)[sent:]
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + write_s
            while rest:
                await trio.lowlevel.wait_writable(fd)
                try:
                    rest = rest[os.write(fd, rest) :]
                except BlockingIOError:
                    continue
                except OSError as exc:
                    raise trio.BrokenResourceError(f"write failed: {exc!r}") from exc
        if scope.cancelled_caught:
            raise WriteTimedOut


def connection_io(stream: trio.abc.Stream) -> StreamIO | SocketIO:
    """The raw-socket path for a plaintext TCP stream, the stream itself otherwise."""
    if type(stream) is trio.SocketStream:
        return SocketIO(stream)
    return StreamIO(stream)
