"""A stream whose writes have a deadline: a client that does not read what the console sends
(a stalled event-stream reader, say) is dropped after ``write_timeout`` seconds instead of
holding a task and a pending write forever.

hypercorn writes inside a shielded cancel scope (so a cancellation never leaves half a frame
behind); the deadline here is a scope *inside* that shield, so it still applies. When it
expires the connection is closed and the write raises ``BrokenResourceError``, which hypercorn
handles as the client going away. Nothing is ever buffered here: each write waits for the
socket.

``drop()`` ends the connection at once, a write in progress included: the console calls it on
every connection when the broker shuts down, since the shield would otherwise hold a write to
a client that does not read (and with it the broker's exit) for the whole ``write_timeout``."""

from __future__ import annotations

import trio


class DeadlineStream(trio.abc.HalfCloseableStream):
    def __init__(self, inner: trio.SocketStream, write_timeout: float) -> None:
        self.inner = inner
        self.write_timeout = write_timeout
        self.dropped = False
        self._writing: trio.CancelScope | None = None

    @property
    def socket(self) -> trio.socket.SocketType:  # hypercorn reads the peer's address from it
        return self.inner.socket

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.dropped:
            raise trio.BrokenResourceError("connection dropped")
        with trio.move_on_after(self.write_timeout) as self._writing:
            await self.inner.send_all(data)
            return
        self.dropped = True
        await trio.aclose_forcefully(self.inner)
        raise trio.BrokenResourceError(f"client did not read for {self.write_timeout} s")

    def drop(self) -> None:
        """End the connection now: a write in progress (even in a shielded scope) fails."""
        self.dropped = True
        if self._writing is not None:
            self._writing.cancel()

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()
