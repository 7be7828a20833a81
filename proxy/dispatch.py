"""From a request frame to a response frame.

Protocol violations (undecodable frames, unknown APIs, versions we do not serve) raise
``wire.errors.ProtocolError``: the connection logs it and closes, as Kafka does. The one
exception is ApiVersions at a version we do not know, answered per KIP-511. A bug in a
handler costs that one request: it is logged and answered with UNKNOWN_SERVER_ERROR in the
API's own response shape; the connection and the broker carry on. A ``StorageError`` that
escapes a handler (a log that went offline) is answered KAFKA_STORAGE_ERROR the same way, as
Kafka's ``getErrorResponse`` maps KafkaStorageException. A handler that refuses a request as a
whole (not authorized: ``proxy/acl/checks.py``) raises ``ErrorReply(code)`` and gets its API's
error reply the same way, logged at DEBUG only.

Requests that may park (``may_park``: a long-poll Fetch, JoinGroup/SyncGroup, the
transaction APIs that wait for a running completion, a Produce that waits for its fsync, an
injected delay) first call the connection's ``before_wait``, which sends the replies it has
gathered so far: Kafka answers each request when it is done, so a reply must never wait
behind a later request's long poll.

With ``kafkad.fault.injection`` set, each decoded request first asks the injector
(``proxy/fault_injection.py``) for a fault: a delay, an error answered in place of the
handler, or a closed connection before or after the handler runs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from proxy.broker import Broker
from proxy.context import RequestContext
from proxy.fault_injection import Fault
from proxy.outcomes import NO_RESPONSE, CloseConnection, ErrorReply
from proxy.principal import ANONYMOUS, KafkaPrincipal
from proxy.quotas import enforce
from proxy.quotas.enforce import EXEMPT_KEYS
from proxy.registry import REGISTRY, Handler, advertised, entry, served
from proxy.sasl.session import SaslSession
from storage.api import NEVER, StorageError
from wire.codec import (
    RequestHeader,
    api_versions_fallback,
    decode_request,
    encode_response,
    response_class,
)
from wire.errors import UnsupportedVersion
from wire.versions import error_response

log = logging.getLogger("kafkad.dispatch")

API_VERSIONS_KEY = 18
PRODUCE_KEY = 0
FETCH_KEY, JOIN_GROUP_KEY, SYNC_GROUP_KEY = 1, 11, 14
# InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn: may wait for the id's running
# completion (TxnCoordinator.settle, up to its completion wait).
SETTLING_TXN_KEYS = frozenset({22, 24, 25, 26})
_FSYNC_CACHE = 1024  # topics whose flush.messages answer _waits_for_fsync keeps
# RequestStats.record's arguments: api key, version, the handler's time (s), the response
StatsEntry = tuple[int, int, float, Any]


def _no_error_reply_for_acks0(header: RequestHeader, body: Any, exc: Exception) -> None:
    """A Produce with acks=0 never gets a response, not even an error: Kafka's
    ``ProduceRequest.getErrorResponse`` is null there and the connection is closed."""
    if header.api_key == PRODUCE_KEY and getattr(body, "acks", None) == 0:
        raise CloseConnection(f"acks=0 produce failed: {exc!r}") from exc


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.advertised = advertised()
        self.served = served()
        self.faults = broker.faults
        self.throttles = broker.throttles  # (set once, in Broker.__init__)
        self.record = broker.metrics.requests.record  # /metrics: per-API counters
        # _waits_for_fsync's answers: topic name or id -> (its settings mapping, the answer)
        self._fsync_waits: dict[Any, tuple[Any, bool]] = {}

    def may_park(self, api_key: int, body: Any) -> bool:
        """Whether the request may wait for something other than its own work (another
        request, a timer, an fsync) before it is answered."""
        if api_key == PRODUCE_KEY:  # first: the hot path
            if body.acks == 0:
                return False
            if body.transactional_id is not None and int(body.__version__) >= 12:
                return True  # TV2: the partition added through the coordinator, which may wait
            for topic_data in body.topic_data:  # noqa: SIM110 (any() + a generator: +0.4 us)
                if self._waits_for_fsync(topic_data):
                    return True
            return False
        if api_key == FETCH_KEY:
            return bool(body.max_wait.total_seconds() > 0 and body.min_bytes > 0)
        return api_key in (JOIN_GROUP_KEY, SYNC_GROUP_KEY) or api_key in SETTLING_TXN_KEYS

    def _waits_for_fsync(self, topic_data: Any) -> bool:
        """An append to the topic may wait for a (group-commit) fsync: its effective
        ``flush.messages`` (the topic's own, or ``log.flush.interval.messages``) is finite.
        Produce v13 names the topic by id."""
        topics = self.broker.topics
        name = getattr(topic_data, "name", None)
        topic = topics.get(name) if name is not None else topics.by_id(topic_data.topic_id)
        if topic is None:
            return False
        # Kept per settings mapping: a config change replaces the topic's (storage/topics.py),
        # and the one held here is never freed, so its identity is never reused.
        settings = topic.settings
        key = name if name is not None else topic_data.topic_id
        found = self._fsync_waits.get(key)
        if found is not None and found[0] is settings:
            return found[1]
        waits = topic.int_setting("flush.messages") < NEVER
        if len(self._fsync_waits) >= _FSYNC_CACHE:
            self._fsync_waits.clear()
        self._fsync_waits[key] = (settings, waits)
        return waits

    async def handle(
        self,
        frame: bytes,
        peer: str = "",
        before_wait: Callable[[], Awaitable[None]] | None = None,
        listener: str = "",
        principal: KafkaPrincipal = ANONYMOUS,
        session: SaslSession | None = None,
        mute: Callable[[int], None] | None = None,
        stats: list[StatsEntry] | None = None,
    ) -> bytes | None:
        """The response frame for ``frame`` (None: no response). ``before_wait`` is awaited
        before a request that may park (the connection sends its ready replies); ``mute(ms)``
        is called when a quota throttles the connection (``proxy/quotas/enforce.py``). With
        ``stats`` the request's metrics entry is appended there for the caller to ``record``
        once the reply is written (off the round trip's critical path), else recorded here."""
        try:
            header, body = decode_request(frame, self.served)
        except UnsupportedVersion as exc:
            hdr = exc.header
            if hdr is not None and hdr.api_key == API_VERSIONS_KEY:
                return api_versions_fallback(hdr, self.advertised)
            raise
        # (the header's fields unpacked once: each named-tuple attribute is a lookup)
        api_key, api_version, correlation_id, client_id = header
        log.debug(
            "request %s v%d corr=%d client=%s", api_key, api_version, correlation_id, client_id
        )
        faults = self.faults
        fault = faults.decide(api_key, client_id) if faults is not None else None
        if before_wait is not None and (
            (fault is not None and fault.delay_ms) or self.may_park(api_key, body)
        ):
            await before_wait()
        handler = REGISTRY.get(api_key) or entry(api_key)
        if handler.as_sent or type(body) is handler.request:  # Handler.read's own shortcut
            req = body
        else:
            try:
                req = handler.read(body)
            except Exception:  # a bug in a version conversion: this request fails, nothing else
                log.exception("api %d v%d: request conversion failed", api_key, api_version)
                return encode_response(header, _every_code(header, ErrorCode.unknown_server_error))
        if fault is not None and not fault.none:
            injected = await self._inject(fault, header, body)
            if injected is not None:
                return encode_response(header, _error_reply(handler, header, req, body, injected))
        ctx = RequestContext(header, self.broker, peer, listener, principal, session)
        started = perf_counter()
        encoded: bytes | None = None
        throttles = self.throttles
        quota_bound = throttles.enabled and api_key not in EXEMPT_KEYS
        try:
            if quota_bound:
                enforce.start(throttles)
                if api_key == FETCH_KEY:
                    req = enforce.limit_fetch(throttles, ctx, req)
            answer = await handler.fn(ctx, req)
            if quota_bound:
                answer = enforce.settle(throttles, ctx, len(frame), req, answer, mute)
            if answer is NO_RESPONSE:
                response = answer
            elif handler.encode is not None:  # the hot path's own encoder (registry.py)
                encoded = handler.encode(answer, correlation_id, api_version)
                response = answer
            else:
                response = handler.write(answer, body, api_version)
        except CloseConnection:
            raise
        except ErrorReply as exc:  # refused as a whole (e.g. not authorized): its error reply
            log.debug("api %d v%d refused: %s", header.api_key, header.api_version, exc)
            response = _refused(handler, header, req, body, exc, exc.code, ctx, mute, quota_bound)
        except StorageError as exc:  # e.g. a read from a log that went offline
            log.error("api %d v%d: storage error: %s", header.api_key, header.api_version, exc)
            code = ErrorCode.kafka_storage_error
            response = _refused(handler, header, req, body, exc, code, ctx, mute, quota_bound)
        except Exception as exc:
            log.exception(
                "handler for api %d v%d failed (client %s, corr %d)",
                header.api_key,
                header.api_version,
                header.client_id,
                header.correlation_id,
            )
            code = ErrorCode.unknown_server_error
            response = _refused(handler, header, req, body, exc, code, ctx, mute, quota_bound)
        finally:  # (settle stopped it already unless the handler failed, closed or was cancelled)
            if quota_bound:
                enforce.stop(throttles)
        elapsed = perf_counter() - started
        if stats is None:
            self.record(api_key, api_version, elapsed, response)
        else:
            stats.append((api_key, api_version, elapsed, response))
        if fault is not None and fault.drop_after:
            raise CloseConnection(f"fault injection: dropped after api {api_key}")
        if response is NO_RESPONSE:
            return None
        return encoded if encoded is not None else encode_response(header, response)

    def error_answer(self, frame: bytes, code: ErrorCode) -> bytes | None:
        """``frame`` answered with its API's error reply carrying ``code`` (Kafka's
        ``getErrorResponse``), without running its handler; None if it cannot be decoded."""
        try:
            header, body = decode_request(frame, self.served)
            handler = entry(header.api_key)
            req = handler.read(body)
        except Exception:  # undecodable, or a version we do not serve: no answer
            return None
        return encode_response(header, _error_reply(handler, header, req, body, code))

    async def _inject(self, fault: Fault, header: RequestHeader, body: Any) -> ErrorCode | None:
        """Apply ``fault`` before the handler: the error to answer instead of running the
        handler, or None to go on and run it."""
        log.info(
            "fault injection: api %d v%d corr=%d: %s",
            header.api_key,
            header.api_version,
            header.correlation_id,
            fault,
        )
        if fault.delay_ms:
            await trio.sleep(fault.delay_ms / 1000)
        if fault.drop:
            raise CloseConnection(f"fault injection: dropped api {header.api_key}")
        if fault.error is None:
            return None
        if header.api_key == PRODUCE_KEY and body.acks == 0:
            raise CloseConnection(f"fault injection: acks=0 produce failed with {fault.error.name}")
        return fault.error


def _error_reply(
    entry: Handler[Any, Any], header: RequestHeader, req: Any, body: Any, code: ErrorCode
) -> Any:
    """The handler's own error reply in the version the client spoke; if that fails too (a
    bug), every error code set and every list empty."""
    try:
        return entry.write(entry.error_reply(req, code), body, header.api_version)
    except Exception:
        log.exception("error reply for api %d v%d failed", header.api_key, header.api_version)
        return _every_code(header, code)


def _refused(
    entry: Handler[Any, Any],
    header: RequestHeader,
    req: Any,
    body: Any,
    exc: Exception,
    code: ErrorCode,
    ctx: RequestContext,
    mute: Callable[[int], None] | None,
    quota_bound: bool,
) -> Any:
    """The answer to a request that failed as a whole with ``code`` (none for acks=0: closed),
    charged to the request quota as Kafka's sendErrorResponseMaybeThrottle."""
    _no_error_reply_for_acks0(header, body, exc)
    response = _error_reply(entry, header, req, body, code)
    if quota_bound:
        response = enforce.settle_error(ctx.broker.throttles, ctx, req, response, mute)
    return response


def _every_code(header: RequestHeader, code: ErrorCode) -> Any:
    """The version's response with every error code set to ``code`` and every list empty."""
    return error_response(response_class(header.api_key, header.api_version), code)
