"""One client connection through the proxy: three tasks and a queue of response slots.

The reader task takes request frames from the client in order. For each it asks the fault
injector (``proxy/fault_injection.py``, with the request's client id) what to do, then either
forwards the frame upstream unchanged and queues an UPSTREAM slot, or queues a LOCAL slot
holding the proxy's own answer (an injected error), or closes the connection (drop, a
partition, a malformed frame). The upstream reader cuts the upstream's bytes into response
frames, and notices at once when the upstream closes. The writer task takes the slots in
request order: an UPSTREAM slot takes the upstream's next response (it must carry the slot's
correlation id, since Kafka answers in request order), rewrites broker addresses in it when
its API carries them (``proxy/forward/rewrite.py``) and sends it on; a LOCAL slot is sent as
it is. So a client gets its answers in request order with its own correlation ids, however
they were made.

Writes are batched, never delayed: all the whole frames of one read from the client go
upstream in one write, and all the answers ready at once (the upstream's frames of one read,
injected errors) go to the client in one write. A pipelining client's burst of 64 requests
costs two writes, not 128; a lone request is written as soon as it is read. Both sockets have
TCP_NODELAY (trio sets it on every TCP ``SocketStream``), so no write waits for an ACK.

SASL passes through: a SaslHandshake/SaslAuthenticate is a request like any other. After a
successful SaslHandshake v0 the client sends its tokens unframed (size-prefixed, no request
header) and the upstream answers each with one such token; the proxy forwards as many as the
mechanism has client tokens (PLAIN and OAUTHBEARER one, SCRAM two; an OAUTHBEARER error
challenge one more) and then reads requests again. GSSAPI's rounds cannot be counted from
outside, so a v0 handshake for it closes the connection (clients use v1 when offered).

An acks=0 Produce queues no slot (no response comes), as Kafka; an answer the upstream
sends all the same (more answers than requests forwarded) closes the connection at once. A
``drop_after`` fault forwards the request, waits for its response and then closes the client
connection without passing it on: the write happened upstream, the client never hears. A
``delay`` holds the request (and every later one, as kafkad's own dispatcher does) before it
is forwarded.

Every way out closes both sockets: the client or the upstream closing, an upstream silent
for ``upstream_timeout_s`` while a response is owed, a frame that cannot be read (either
side: ``wire.errors.ProtocolError``), a response whose correlation id is not the one owed.
Nothing here is awaited without a deadline but the client's own reads.
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

from proxy.fault_injection import NO_FAULT
from proxy.forward import rewrite
from proxy.forward.frames import (
    PRODUCE_KEY,
    answer_wait_s,
    correlation_id,
    error_answer,
    produce_acks,
    sasl_v0_mechanism,
)
from proxy.forward.record import Kind, Recorder
from proxy.forward.txn_view import TXN_APIS
from wire.errors import ProtocolError
from wire.framing import FrameDecoder, Want
from wire.headers import API_VERSIONS_KEY, read_fixed_header

if TYPE_CHECKING:
    from proxy.forward.server import ForwardProxy

log = logging.getLogger("kafkad.proxy")

MAX_IN_FLIGHT = 64  # queued reads' worth of slots before the reader waits
RECEIVE_BYTES = 1 << 16


class Close(Exception):
    """Close this connection (why: the message)."""


@dataclass(frozen=True, slots=True)
class Slot:
    api_key: int
    api_version: int
    correlation_id: int
    local: bytes | None = None  # the proxy's own answer (size prefix included)
    drop_after: bool = False
    wait_s: float = 0.0  # a longer wait the request may rightly need (a JoinGroup's rebalance)
    sasl_v0: str | None = None  # a SaslHandshake v0's mechanism: raw tokens follow its success
    request: bytes | None = None  # kept for the transaction view (proxy/forward/txn_view.py)
    sent_at: float = 0.0  # trio time the request was forwarded (txn view latency)


@dataclass(slots=True)
class _Batch:
    """What one read from the client brought: requests to forward, slots to queue."""

    upstream: bytearray = field(default_factory=bytearray)
    owed: int = 0
    slots: list[Slot] = field(default_factory=list)


@dataclass(slots=True, eq=False)  # hashed by identity: the proxy keeps a set of them
class Live:
    """A connection as the proxy's partition timers see it."""

    upstream: tuple[str, int]
    scope: trio.CancelScope
    client_id: str | None = None
    family: str = "bootstrap"  # the upstream listener its broker was learnt through


async def forward_connection(
    proxy: ForwardProxy,
    client: trio.abc.Stream,
    upstream: trio.abc.Stream,
    live: Live,
    recorder: Recorder | None,
    peer: str,
) -> None:
    """Pump one connection until either side ends it; both streams are closed on return."""
    state = _Conn(proxy, client, upstream, live, recorder, peer)
    send, receive = trio.open_memory_channel[list[Slot]](MAX_IN_FLIGHT)
    answers_in, answers_out = trio.open_memory_channel[list[bytes]](0)
    try:
        async with client, upstream, trio.open_nursery() as nursery:
            state.nursery = nursery
            nursery.start_soon(state.upstream_reader, answers_in)
            nursery.start_soon(state.writer, receive, answers_out)
            await state.reader(send)
            # The client closed: answers still owed go nowhere. Stop.
            nursery.cancel_scope.cancel()
    except Exception as exc:
        why = _why(exc)
        if why is None:  # a bug: this connection ends, logged with its traceback
            log.exception("proxy connection %s failed", state.peer)
            why = f"internal error: {exc!r}"
        state.close_reason = why
    finally:
        why = state.close_reason or (
            "partitioned (fault injection)" if live.scope.cancel_called else "client closed"
        )
        where = proxy.describe(live.upstream)
        log.info("proxy connection %s -> %s closed: %s", state.peer, where, why)
        if recorder is not None:
            recorder.note(f"closed: {why}")
            recorder.close()


class _Conn:
    def __init__(
        self,
        proxy: ForwardProxy,
        client: trio.abc.Stream,
        upstream: trio.abc.Stream,
        live: Live,
        recorder: Recorder | None,
        peer: str,
    ) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.live = live
        self.rec = recorder
        self.close_reason = ""
        self.nursery: trio.Nursery | None = None
        self.owed = 0  # requests forwarded and not yet answered
        self.forwarded = 0  # requests forwarded in all (each owes one answer)
        self.upstream_ended = False
        self.peer = peer
        self.raw_tokens = 0  # unframed SASL tokens (SaslHandshake v0) the client is to send
        self.raw_mechanism = ""

    def _note(self, text: str) -> None:
        log.info("proxy %s: %s", self.peer, text)
        if self.rec is not None:
            self.rec.note(text)

    async def reader(self, slots: trio.MemorySendChannel[list[Slot]]) -> None:
        """Requests from the client, handled a chunk at a time: every whole frame of one read
        is decided, the ones forwarded go upstream in one write and their slots to the writer
        in one list (a pipelining client's burst costs one syscall, not one per request)."""
        decoder = FrameDecoder(self.proxy.config.max_frame_bytes)
        batch = _Batch()
        async with slots:
            try:
                while True:
                    frame = decoder.next_frame()
                    if frame is Want.EOF:
                        return
                    if frame is Want.MORE:
                        await self._flush(batch, slots)
                        decoder.feed(await self.client.receive_some(RECEIVE_BYTES))
                        continue
                    await self._request(frame, batch, slots)
            except Close:
                await self._flush(batch, slots)  # what came before the close was forwarded
                raise

    async def _request(
        self, frame: bytes, batch: _Batch, slots: trio.MemorySendChannel[list[Slot]]
    ) -> None:
        if self.raw_tokens > 0:  # an unframed SASL token: no header, one raw token back
            self.raw_tokens -= 1
            self._note(f"SASL {self.raw_mechanism} token, unframed ({len(frame)} bytes)")
            batch.upstream += len(frame).to_bytes(4, "big")
            batch.upstream += frame
            batch.owed += 1
            batch.slots.append(Slot(RAW_SASL, 0, 0))
            return
        faults = self.proxy.faults
        header, header_end = read_fixed_header(frame)
        self.live.client_id = header.client_id
        if self.rec is not None:
            secret = SECRET_REQUESTS.get(header.api_key)
            if secret is not None:  # a password or a token's HMAC stays off disk
                self.rec.add(Kind.REQUEST, frame[:header_end])
                self.rec.note(f"{secret} not recorded")
            else:
                self.rec.add(Kind.REQUEST, frame)
        if self.proxy.partitioned(self.live):
            raise Close(f"partitioned from {self.proxy.describe(self.live.upstream)}")
        fault = faults.decide(header.api_key, header.client_id) if faults else NO_FAULT
        acks0 = header.api_key == PRODUCE_KEY and produce_acks(frame, header, header_end) == 0
        if fault is not NO_FAULT and not fault.none:
            self._note(f"fault injection: corr={header.correlation_id} {fault}")
            if fault.delay_ms:
                await self._flush(batch, slots)
                await trio.sleep(fault.delay_ms / 1000)
            if fault.drop:
                raise Close(f"fault injection: dropped api {header.api_key}")
            if fault.error is not None:
                answer = None if acks0 else error_answer(frame, fault.error)
                if answer is None:
                    raise Close(f"fault injection: {fault.error.name} has no answer here")
                if self.rec is not None:
                    self.rec.add(Kind.LOCAL, answer[4:])
                batch.slots.append(
                    Slot(header.api_key, header.api_version, header.correlation_id, answer)
                )
                return
        batch.upstream += len(frame).to_bytes(4, "big")
        batch.upstream += frame
        if acks0:
            if fault.drop_after:
                raise Close("fault injection: dropped after an acks=0 produce")
            return
        batch.owed += 1
        batch.slots.append(
            Slot(
                header.api_key,
                header.api_version,
                header.correlation_id,
                drop_after=fault.drop_after,
                wait_s=answer_wait_s(frame, header),
                sasl_v0=sasl_v0_mechanism(frame, header, header_end),
                request=frame if header.api_key in TXN_APIS else None,
                sent_at=trio.current_time(),
            )
        )

    async def _flush(self, batch: _Batch, slots: trio.MemorySendChannel[list[Slot]]) -> None:
        """Send the batch's requests upstream in one write, then its slots to the writer."""
        if batch.upstream:
            self.owed += batch.owed
            self.forwarded += batch.owed
            batch.owed = 0
            with trio.move_on_after(self.proxy.config.upstream_timeout_s) as scope:
                await self.upstream.send_all(batch.upstream)
            if scope.cancelled_caught:
                raise Close("upstream did not take a request in time")
            batch.upstream.clear()
        if batch.slots:
            queued, batch.slots = batch.slots, []
            await slots.send(queued)

    async def upstream_reader(self, answers: trio.MemorySendChannel[list[bytes]]) -> None:
        """Response frames from the upstream, handed to the writer a read at a time. An
        upstream that closes while nothing is owed closes the client at once (a client talking
        to the broker directly would see that close too); with answers owed, the writer passes
        on those that arrived and closes at the first one missing."""
        decoder = FrameDecoder(self.proxy.config.max_frame_bytes)
        frames: list[bytes] = []
        received = 0
        async with answers:
            while True:
                frame = decoder.next_frame()
                if isinstance(frame, bytes):
                    received += 1
                    if received > self.forwarded:  # e.g. an answer to an acks=0 Produce
                        raise Close("upstream sent an answer no request asked for")
                    frames.append(frame)
                    continue
                if frames:
                    await answers.send(frames)
                    frames = []
                if frame is Want.MORE:
                    decoder.feed(await self.upstream.receive_some(RECEIVE_BYTES))
                else:
                    self.upstream_ended = True
                    if self.owed == 0:
                        raise Close("upstream closed the connection")
                    return

    async def writer(
        self,
        slots: trio.MemoryReceiveChannel[list[Slot]],
        answers: trio.MemoryReceiveChannel[list[bytes]],
    ) -> None:
        """Answers in request order. Whatever is ready goes to the client in one write: the
        answers for a burst of requests that came in one read leave in one write too."""
        ready: collections.deque[bytes] = collections.deque()
        out = bytearray()
        async with slots, answers:
            async for queued in slots:
                while True:
                    for slot in queued:
                        if slot.local is not None:
                            out += slot.local
                            continue
                        if not ready:
                            ready.extend(await self._next_responses(answers, slot.wait_s, out))
                        await self._answer(slot, ready.popleft(), out)
                    try:
                        queued = slots.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                await self._send_client(out)
        # The reader ended (client EOF): nothing more is owed.

    async def _send_client(self, out: bytearray) -> None:
        if out:
            await self.client.send_all(out)  # trio releases its view of ``out`` on return
            out.clear()

    async def _answer(self, slot: Slot, frame: bytes, out: bytearray) -> None:
        """Check the upstream's answer for ``slot`` and add what the client gets to ``out``."""
        self.owed -= 1
        if slot.api_key == RAW_SASL:
            self._raw_answer(frame, out)
            return
        if slot.sasl_v0 is not None:
            self._sasl_v0_answered(slot.sasl_v0, frame)
        if slot.request is not None:
            latency_ms = (trio.current_time() - slot.sent_at) * 1000
            self.proxy.txns.observe(slot.api_key, slot.api_version, slot.request, frame, latency_ms)
        got = correlation_id(frame)
        if got != slot.correlation_id:
            raise Close(f"upstream answered correlation id {got}, {slot.correlation_id} owed")
        if self.rec is not None:
            secret = SECRET_RESPONSES.get(slot.api_key)
            if secret is None:
                self.rec.add(Kind.RESPONSE, frame)
            else:  # a delegation token's HMAC: its correlation id only
                self.rec.add(Kind.RESPONSE, frame[:4])
                self.rec.note(f"{secret} not recorded")
        if slot.drop_after:
            await self._send_client(out)  # the answers before it were owed and arrived
            raise Close(f"fault injection: dropped after api {slot.api_key} was answered")
        rewritten = await self._rewritten(slot, frame)
        if rewritten is None:
            out += len(frame).to_bytes(4, "big")
            out += frame
        else:
            if self.rec is not None:
                self.rec.add(Kind.REWRITTEN, rewritten[4:])
            out += rewritten
        if self.upstream_ended and self.owed == 0:
            await self._send_client(out)
            raise Close("upstream closed the connection")

    def _sasl_v0_answered(self, mechanism: str, frame: bytes) -> None:
        """A SaslHandshake v0 answer: on success the client's next frames are raw tokens, as
        many as the mechanism has rounds (``RAW_ROUNDS``). A mechanism whose rounds the proxy
        cannot count closes the connection: it could not tell where the tokens end."""
        if len(frame) < 6 or int.from_bytes(frame[4:6], "big", signed=True) != 0:
            return
        rounds = RAW_ROUNDS.get(mechanism)
        if rounds is None:
            raise Close(
                f"SaslHandshake v0 with {mechanism}: kafkad proxy follows unframed tokens only "
                f"for {', '.join(RAW_ROUNDS)} (clients on SaslHandshake v1 pass through)"
            )
        self.raw_tokens, self.raw_mechanism = rounds, mechanism

    def _raw_answer(self, frame: bytes, out: bytearray) -> None:
        """The upstream's raw token for the client's raw token (no correlation id)."""
        self._note(f"SASL {self.raw_mechanism} server token, unframed ({len(frame)} bytes)")
        if self.raw_mechanism == OAUTHBEARER and frame:
            self.raw_tokens += 1  # an error challenge: the client answers it with one more
        out += len(frame).to_bytes(4, "big")
        out += frame

    async def _next_responses(
        self, answers: trio.MemoryReceiveChannel[list[bytes]], wait_s: float, out: bytearray
    ) -> list[bytes]:
        """The upstream's next response frames, within the upstream timeout (or ``wait_s``)
        from when this slot's turn came (the responses before it were on time). What is ready
        for the client is sent first, unless the upstream has more already."""
        try:
            return answers.receive_nowait()
        except trio.WouldBlock:
            pass
        except trio.EndOfChannel:
            await self._send_client(out)
            raise Close("upstream closed the connection") from None
        await self._send_client(out)
        timeout = max(self.proxy.config.upstream_timeout_s, wait_s)
        with trio.move_on_after(timeout):
            try:
                return await answers.receive()
            except trio.EndOfChannel:
                raise Close("upstream closed the connection") from None
        raise Close(f"upstream did not answer within {timeout:g} s")

    async def _rewritten(self, slot: Slot, frame: bytes) -> bytes | None:
        """The frame to send in place of ``frame`` (size prefix included), or None for as is.

        Clients ask for the same Metadata again and again and the upstream's answers differ
        only in their correlation id, so a rewritten body is kept (``proxy.rewritten``, emptied
        when a listener opens or is released) and reused for the same upstream bytes."""
        if slot.api_key == API_VERSIONS_KEY:
            return rewrite.cap_api_versions(slot.api_version, frame)
        if not rewrite.carries_endpoints(slot.api_key, slot.api_version):
            return None
        if not rewrite.might_carry_endpoints(slot.api_key, slot.api_version, frame):
            return None
        key = (slot.api_key, slot.api_version, frame[4:])
        cached = self.proxy.rewritten.get(key, MISSING)
        if cached is MISSING:
            decoded = rewrite.decode(slot.api_key, slot.api_version, frame)
            if decoded.endpoints:
                local = await self.proxy.local_addresses(
                    decoded.endpoints, self.live.family, rewrite.complete_set(slot.api_key)
                )
                cached = rewrite.rewrite(decoded, local)[8:]
            else:
                cached = None
            self.proxy.remember_rewrite(key, cached)
        if cached is None:
            return None
        assert isinstance(cached, bytes)
        return (len(cached) + 4).to_bytes(4, "big") + frame[:4] + cached


MISSING = object()
RAW_SASL = -1  # the api key of a slot for an unframed SASL token
# Credentials a recording leaves out (the entry keeps the header): a SASL token (PLAIN's
# password), a SCRAM salted password (enough to log in as the user), a delegation token's
# HMAC (the password of token authentication) and config values (a broker config may be a
# password: Kafka's request log hides those of AlterConfigs and IncrementalAlterConfigs).
SECRET_REQUESTS = {
    33: "AlterConfigs: config values",
    44: "IncrementalAlterConfigs: config values",
    36: "SaslAuthenticate: auth_bytes",
    39: "RenewDelegationToken: hmac",
    40: "ExpireDelegationToken: hmac",
    51: "AlterUserScramCredentials: salts and salted passwords",
}
SECRET_RESPONSES = {38: "CreateDelegationToken: hmac", 41: "DescribeDelegationToken: hmacs"}
OAUTHBEARER = "OAUTHBEARER"
# client tokens of each mechanism after SaslHandshake v0, as Kafka's SaslServers take them
RAW_ROUNDS = {"PLAIN": 1, "SCRAM-SHA-256": 2, "SCRAM-SHA-512": 2, OAUTHBEARER: 1}


CLOSING = (Close, ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError, OSError)


def _why(exc: BaseException) -> str | None:
    """The one-line reason a connection ended with ``exc``; None for a bug."""
    if isinstance(exc, BaseExceptionGroup):
        reasons = [_why(sub) for sub in exc.exceptions]
        return None if None in reasons else str(reasons[0])
    if isinstance(exc, Close):
        return str(exc)
    if isinstance(exc, ProtocolError):
        return f"malformed frame: {exc}"
    if isinstance(exc, CLOSING):
        return f"socket: {exc!r}"
    return None
