"""A SASL_PLAINTEXT listener driven with raw requests, over in-memory streams under trio's
autojump clock (the failure delay and the session lifetime in virtual time)."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import request as md
from kio.schema.sasl_authenticate.v0.request import SaslAuthenticateRequest as Auth0
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest as Auth2
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as Hand0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest as Hand1

from tests.proxy.harness import RawClient, connect, encode_request, running_broker
from tests.proxy.test_server_timeouts import closed_at, memory_broker

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
SASL = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:9092",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "connection.failed.authentication.delay.ms": "2000",
}
METADATA = md.MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


async def test_handshake_then_authenticate_then_any_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with memory_broker(None, **SASL) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        versions = await c.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1")
        )
        assert versions.error_code == ErrorCode.none
        shook = await c.request(Hand1(mechanism="PLAIN"))
        assert (shook.error_code, shook.mechanisms) == (ErrorCode.none, ("PLAIN", "SCRAM-SHA-512"))
        auth = await c.request(Auth2(auth_bytes=b"\0alice\0alice-secret"))
        assert (auth.error_code, auth.error_message) == (ErrorCode.none, None)
        assert auth.session_lifetime.total_seconds() == 0  # connections.max.reauth.ms=0
        assert (await c.request(METADATA)).brokers


async def test_a_wrong_password_is_answered_then_closed_after_the_delay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with memory_broker(None, **SASL) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        await c.request(Hand1(mechanism="PLAIN"))
        failed = await c.request(Auth0(auth_bytes=b"\0alice\0wrong"))
        assert failed.error_code == ErrorCode.sasl_authentication_failed
        assert failed.error_message == "Authentication failed: Invalid username or password"
        start = trio.current_time()
        assert await closed_at(c) - start == pytest.approx(2.0, abs=0.01)
        # another connection is unharmed
        d = RawClient(await listener.connect())  # type: ignore[arg-type]
        await d.request(Hand1(mechanism="PLAIN"))
        assert (await d.request(Auth2(auth_bytes=b"\0alice\0alice-secret"))).error_code == 0


async def test_an_unserved_mechanism_is_refused_with_the_enabled_ones(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with memory_broker(None, **SASL) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        refused = await c.request(Hand1(mechanism="GSSAPI"))
        assert refused.error_code == ErrorCode.unsupported_sasl_mechanism
        assert refused.mechanisms == ("PLAIN", "SCRAM-SHA-512")
        await closed_at(c)


async def test_a_request_before_authenticating_closes_without_an_answer(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with memory_broker(None, **SASL) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        with caplog.at_level(logging.INFO, logger="kafkad.connection"):
            await c.send_raw(encode_request(METADATA, 1))
            start = trio.current_time()
            assert await c.read_frame() is None
        # Kafka's IllegalSaslStateException: an authentication failure, so the delayed close
        assert trio.current_time() - start == pytest.approx(2.0, abs=0.01)
        assert "Unexpected Kafka request (api key 3) during SASL handshake" in caplog.text


async def test_a_request_other_than_authenticate_after_the_handshake_is_answered_then_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Kafka's handleSaslToken: the request's own error reply (ILLEGAL_SASL_STATE), then the
    delayed close of a failed authentication."""
    async with memory_broker(None, **SASL) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        await c.request(Hand1(mechanism="PLAIN"))
        again = await c.request(Hand1(mechanism="PLAIN"))
        assert (again.error_code, again.mechanisms) == (ErrorCode.illegal_sasl_state, ())
        start = trio.current_time()
        assert await closed_at(c) - start == pytest.approx(2.0, abs=0.01)


async def test_a_failed_raw_exchange_is_closed_after_the_delay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with memory_broker(None, **SASL) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        assert (await c.request(Hand0(mechanism="PLAIN"))).error_code == ErrorCode.none
        token = b"\0alice\0wrong"
        await c.send_raw(len(token).to_bytes(4, "big") + token)
        start = trio.current_time()
        assert await closed_at(c) - start == pytest.approx(2.0, abs=0.01)  # no answer


async def test_a_handshake_that_cannot_reauthenticate_lists_no_mechanisms(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with memory_broker(None, **SASL) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        await c.request(Hand1(mechanism="PLAIN"))
        await c.request(Auth2(auth_bytes=b"\0alice\0alice-secret"))
        again = await c.request(Hand1(mechanism="PLAIN"))  # no session expiry: KafkaApis
        assert (again.error_code, again.mechanisms) == (ErrorCode.illegal_sasl_state, ())
        assert (await c.request(METADATA)).brokers


async def test_handshake_v0_then_raw_tokens(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with memory_broker(None, **SASL) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        assert (await c.request(Hand0(mechanism="PLAIN"))).error_code == ErrorCode.none
        token = b"\0alice\0alice-secret"
        await c.send_raw(len(token).to_bytes(4, "big") + token)
        assert await c.read_frame() == b""  # PLAIN's empty server token, size-prefixed
        assert (await c.request(METADATA)).brokers


async def test_the_session_lifetime_bounds_the_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with memory_broker(None, **SASL, **{"connections.max.reauth.ms": "5000"}) as (
        _,
        listener,
    ):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        await c.request(Hand1(mechanism="PLAIN"))
        auth = await c.request(Auth2(auth_bytes=b"\0alice\0alice-secret"))
        assert auth.session_lifetime.total_seconds() == 5
        await trio.sleep(4.9)
        assert (await c.request(METADATA)).brokers
        # re-authentication (KIP-368) renews it
        assert (await c.request(Hand1(mechanism="PLAIN"))).error_code == ErrorCode.none
        renewed = await c.request(Auth2(auth_bytes=b"\0alice\0alice-secret"))
        assert renewed.session_lifetime.total_seconds() == 5
        await trio.sleep(4.9)
        assert (await c.request(METADATA)).brokers
        await trio.sleep(0.2)  # now past it
        await c.send_raw(encode_request(METADATA, 9))
        assert await c.read_frame() is None


async def test_sasl_requests_on_a_plaintext_listener_are_illegal_state() -> None:
    async with running_broker() as (_, port), connect(port) as c:
        assert (
            await c.request(Hand1(mechanism="PLAIN"))
        ).error_code == ErrorCode.illegal_sasl_state
        auth = await c.request(Auth2(auth_bytes=b"x"))
        assert auth.error_code == ErrorCode.illegal_sasl_state


async def test_a_frame_over_sasl_server_max_receive_size_fails_authentication(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Kafka's SaslServerAuthenticator reads with sasl.server.max.receive.size (512 KiB): a
    # larger frame before authentication is an InvalidReceiveException, closed after the delay
    async with memory_broker(None, **SASL) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        await c.request(Hand1(mechanism="PLAIN"))
        start = trio.current_time()
        await c.send_raw((524288 + 1).to_bytes(4, "big") + b"\0" * 1024)
        assert await c.read_frame() is None  # unanswered
        assert trio.current_time() - start == pytest.approx(2.0, abs=0.01)
        # at the limit it is read (and this one fails as a wrong password)
        d = RawClient(await listener.connect())  # type: ignore[arg-type]
        await d.request(Hand1(mechanism="PLAIN"))
        big = await d.request(Auth2(auth_bytes=b"\0alice\0" + b"x" * (524288 - 64)))
        assert big.error_code == ErrorCode.sasl_authentication_failed


async def test_once_authenticated_socket_request_max_bytes_applies(
    autojump_clock: trio.testing.MockClock,
) -> None:
    small = {**SASL, "sasl.server.max.receive.size": "1000"}
    async with memory_broker(None, **small) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        await c.request(Hand1(mechanism="PLAIN"))
        assert (await c.request(Auth2(auth_bytes=b"\0alice\0alice-secret"))).error_code == 0
        names = (f"t{i:04}" for i in range(300))
        many = md.MetadataRequest(
            topics=tuple(md.MetadataRequestTopic(name=n, topic_id=None) for n in names),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        assert len(encode_request(many, 1)) > 1000
        assert len((await c.request(many)).topics) == 300


async def test_an_apiversions_answered_with_an_error_may_be_sent_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Kafka's handleApiVersionsRequest: an unknown version (KIP-511) or an invalid request is
    answered with an error and leaves the state alone, so the client's retry is served."""
    async with memory_broker(None, **SASL) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        header = (18).to_bytes(2, "big") + (9).to_bytes(2, "big") + (1).to_bytes(4, "big")
        payload = header + b"\x00\x01t\x00" + b"\x02t\x021\x00"  # ApiVersions v9
        await c.send_raw(len(payload).to_bytes(4, "big") + payload)
        fallback = await c.read_frame()
        assert fallback is not None and fallback[4:6] == b"\x00\x23"  # UNSUPPORTED_VERSION
        invalid = await c.request(
            ApiVersionsRequest(client_software_name="-", client_software_version="1")
        )
        assert invalid.error_code == ErrorCode.invalid_request
        request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        assert (await c.request(request)).error_code == ErrorCode.none
        await c.send_raw(encode_request(request, 9))  # but not after one answered NONE
        start = trio.current_time()
        assert await c.read_frame() is None
        assert trio.current_time() == start  # Kafka's IllegalStateException: at once


async def test_before_the_handshake_a_frame_over_sasl_server_max_receive_size_fails_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Kafka's SaslServerAuthenticator reads at most sasl.server.max.receive.size (512 KiB)
    from the first byte: an unauthenticated client could otherwise make the broker buffer up
    to socket.request.max.bytes (reproduced: 2 MiB of a 50 MiB frame, connection open)."""
    async with memory_broker(None, **SASL) as (_, listener):
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        await c.send_raw((50 * 1024 * 1024).to_bytes(4, "big") + b"\0" * 1024)
        start = trio.current_time()
        assert await c.read_frame() is None  # unanswered
        # an authentication failure: closed after the delay, not after connections.max.idle.ms
        assert trio.current_time() - start == pytest.approx(2.0, abs=0.01)
