"""One task per client connection.

Kafka serves a connection's requests one at a time and answers in request order; clients
pipeline several requests. We decode every complete frame already received, handle them in
order, and write all their responses with one ``send_all`` (perf-notes rule 2), inside a
shielded scope with a deadline so a cancellation never leaves half a frame on the wire.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import trio

from proxy.dispatch import CloseConnection, Dispatcher
from wire.errors import ProtocolError
from wire.framing import FrameDecoder, Want

log = logging.getLogger("kafkad.connection")

READ_SIZE = 256 * 1024


@dataclass
class NetConfig:
    max_frame_bytes: int = 104857600  # socket.request.max.bytes
    idle_s: float = 600.0  # connections.max.idle.ms
    write_s: float = 30.0


class Connection:
    """A connection the server can stop between requests at shutdown."""

    def __init__(self, stream: trio.abc.Stream, peer: str) -> None:
        self.stream = stream
        self.peer = peer
        self.busy = False
        self.scope = trio.CancelScope()


async def serve_connection(
    conn: Connection, dispatch: Dispatcher, cfg: NetConfig, stopping: trio.Event
) -> None:
    decoder = FrameDecoder(cfg.max_frame_bytes)
    stream = conn.stream
    log.debug("connection opened peer=%s", conn.peer)
    reason = "closed by peer"
    with conn.scope:
        try:
            while True:
                replies: list[bytes] = []
                frame = decoder.next_frame()
                if frame is Want.EOF:
                    break
                if frame is Want.MORE:
                    if stopping.is_set():
                        reason = "broker shutting down"
                        break
                    with trio.move_on_after(cfg.idle_s) as idle:
                        data = await stream.receive_some(READ_SIZE)
                    if idle.cancelled_caught:
                        reason = "idle timeout"
                        break
                    decoder.feed(data)
                    continue
                conn.busy = True
                try:
                    while isinstance(frame, bytes):
                        reply = await dispatch.handle(frame, conn.peer)
                        if reply is not None:
                            replies.append(reply)
                        frame = decoder.next_frame()
                    if replies:
                        with trio.CancelScope(shield=True) as scope:
                            scope.deadline = trio.current_time() + cfg.write_s
                            await stream.send_all(b"".join(replies))
                        if scope.cancelled_caught:
                            reason = "write timed out"
                            break
                finally:
                    conn.busy = False
                if frame is Want.EOF:
                    break
                # frame is Want.MORE: loop to read
        except CloseConnection as exc:
            reason = f"closed by handler: {exc}"
            if replies:
                with trio.move_on_after(cfg.write_s):
                    await stream.send_all(b"".join(replies))
        except ProtocolError as exc:
            reason = f"protocol error: {exc!r}"
            log.warning("closing connection peer=%s: %s", conn.peer, reason)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            reason = f"connection lost: {exc!r}"
        finally:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
    log.debug("connection closed peer=%s reason=%s", conn.peer, reason)
