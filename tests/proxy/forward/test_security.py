"""The forwarding proxy with TLS on both legs and SASL passed through (in process): a kafkad
SASL_SSL broker upstream, the proxy a TLS server to the client and a TLS client upstream,
SaslHandshake v0's unframed tokens followed, and a v0 mechanism the proxy cannot follow."""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest as Auth2
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as Hand0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest as Hand1

from proxy.certs import write_certs
from proxy.config import load_config
from proxy.forward.security import client_facing, upstream_context
from proxy.server import Server
from tests.proxy.forward.test_forward import (
    LIMIT_S,
    _fake_upstream,
    _read_request,
    closed,
    metadata_request,
    raw,
    running_proxy,
)
from tests.proxy.harness import RawClient, connect

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


@asynccontextmanager
async def sasl_ssl_broker(certs: Path) -> AsyncIterator[int]:
    """A kafkad broker with one SASL_SSL listener (PLAIN); yields its port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    overrides = {
        "listeners": f"SASL_SSL://127.0.0.1:{port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "server.pem"),
    }
    cfg = load_config(
        listen=None,
        advertise=None,
        data_dir="memory://",
        config_file=None,
        overrides=overrides,
        environ={},
    )
    server = Server(cfg)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        try:
            yield port
        finally:
            server.stop()


async def tls_client(port: int, certs: Path) -> RawClient:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    tcp = await trio.open_tcp_stream("127.0.0.1", port)
    stream = trio.SSLStream(tcp, ctx, server_hostname="localhost", https_compatible=True)
    await stream.do_handshake()
    return RawClient(stream)  # type: ignore[arg-type]


async def test_sasl_over_tls_on_both_legs_v1_and_v0(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    write_certs(certs)
    tls = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "server.pem"),
        "upstream.ssl.truststore.location": str(certs / "ca.crt"),
    }
    with trio.fail_after(LIMIT_S * 3):
        async with (
            sasl_ssl_broker(certs) as upstream,
            running_proxy(
                upstream,
                client_tls=client_facing(tls),
                upstream_tls=upstream_context(tls),
                record_dir=tmp_path / "rec",
            ) as (_proxy, port),
        ):
            c = await tls_client(port, certs)  # SaslHandshake v1 + SaslAuthenticate
            assert (await c.request(Hand1(mechanism="PLAIN"))).error_code == ErrorCode.none
            auth = await c.request(Auth2(auth_bytes=b"\0alice\0alice-secret"))
            assert auth.error_code == ErrorCode.none
            (broker,) = (await c.request(metadata_request())).brokers
            assert broker.port not in (port, upstream)  # rewritten over TLS too
            await c.aclose()

            c = await tls_client(broker.port, certs)  # v0: the token unframed, both ways
            assert (await c.request(Hand0(mechanism="PLAIN"))).error_code == ErrorCode.none
            token = b"\0alice\0alice-secret"
            await c.send_raw(len(token).to_bytes(4, "big") + token)
            assert await c.read_frame() == b""  # PLAIN's empty server token
            assert (await c.request(metadata_request())).brokers
            await c.aclose()

            c = await tls_client(port, certs)  # a wrong password: the upstream closes
            assert (await c.request(Hand0(mechanism="PLAIN"))).error_code == ErrorCode.none
            token = b"\0alice\0wrong"
            await c.send_raw(len(token).to_bytes(4, "big") + token)
            assert await closed(c)
            await c.aclose()
    recordings = list((tmp_path / "rec").iterdir())
    assert len(recordings) == 3
    for path in recordings:  # passwords stay off disk: SaslAuthenticate and raw tokens
        data = path.read_bytes()
        assert b"alice-secret" not in data and b"\0alice\0wrong" not in data
    assert any(b"auth_bytes not recorded" in p.read_bytes() for p in recordings)


async def test_an_upstream_whose_certificate_is_not_trusted_closes_the_client(
    tmp_path: Path,
) -> None:
    certs, other = tmp_path / "certs", tmp_path / "other"
    write_certs(certs)
    write_certs(other)
    untrusted = upstream_context({"upstream.ssl.truststore.location": str(other / "ca.crt")})
    async with (
        sasl_ssl_broker(certs) as upstream,
        running_proxy(upstream, upstream_tls=untrusted) as (_proxy, port),
        connect(port) as c,
    ):
        await c.send_raw(raw(metadata_request(), 1))
        assert await closed(c)


async def test_a_v0_handshake_for_a_mechanism_whose_rounds_are_unknown_closes() -> None:
    async def accepts_gssapi(stream: trio.SocketStream) -> None:
        frame = await _read_request(stream)
        cid = frame[4:8]
        await stream.send_all(struct.pack(">i", 10) + cid + b"\x00\x00" + b"\x00\x00\x00\x00")
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        up = await _fake_upstream(nursery, accepts_gssapi)
        async with running_proxy(up) as (_p, port), connect(port) as c:
            await c.send_raw(raw(Hand0(mechanism="GSSAPI"), 1))
            assert await closed(c)  # not answered: its raw tokens could not be followed
        nursery.cancel_scope.cancel()


async def test_scram_credentials_and_delegation_token_hmacs_stay_off_disk(tmp_path: Path) -> None:
    """A salted password (AlterUserScramCredentials) and a delegation token's HMAC (the SCRAM
    password of token authentication: Create/DescribeDelegationToken answers, Renew/Expire
    requests) are credentials: recorded as their header and a note, as SaslAuthenticate."""
    from kio.schema.alter_user_scram_credentials.v0 import request as alter
    from kio.schema.create_delegation_token.v3.request import CreateDelegationTokenRequest
    from kio.schema.describe_delegation_token.v3.request import DescribeDelegationTokenRequest
    from kio.schema.expire_delegation_token.v2.request import ExpireDelegationTokenRequest
    from kio.schema.renew_delegation_token.v2.request import RenewDelegationTokenRequest

    from tests.proxy.test_broker_requests import MS

    secret = b"TOKEN-HMAC-SECRET"

    async def answers_with_a_secret(stream: trio.SocketStream) -> None:
        while True:  # a token's answer: its correlation id, no tags, error 0, the secret
            frame = await _read_request(stream)
            token = secret if frame[1] in (38, 41) else b""
            body = frame[4:8] + b"\x00\x00\x00" + token
            await stream.send_all(struct.pack(">i", len(body)) + body)

    upsert = alter.ScramCredentialUpsertion(
        name="alice", mechanism=1, iterations=4096, salt=b"salt", salted_password=secret
    )
    requests = [
        alter.AlterUserScramCredentialsRequest(deletions=(), upsertions=(upsert,)),
        RenewDelegationTokenRequest(hmac=secret, renew_period=1000 * MS),
        ExpireDelegationTokenRequest(hmac=secret, expiry_time_period=1000 * MS),
        CreateDelegationTokenRequest(
            owner_principal_type=None, owner_principal_name=None, renewers=(), max_lifetime=-MS
        ),
        DescribeDelegationTokenRequest(owners=None),
    ]
    async with trio.open_nursery() as nursery:
        up = await _fake_upstream(nursery, answers_with_a_secret)
        async with running_proxy(up, record_dir=tmp_path) as (_p, port), connect(port) as c:
            for cid, request in enumerate(requests, 1):
                await c.send_raw(raw(request, cid))
                with trio.fail_after(LIMIT_S):
                    answer = await c.read_frame() or b""
                assert secret in answer or cid < 4  # the client gets every answer whole
        nursery.cancel_scope.cancel()
    (path,) = list(tmp_path.glob("*.kdrec"))  # noqa: ASYNC240  (the proxy has stopped)
    data = path.read_bytes()
    assert secret not in data
    assert data.count(b"not recorded") == len(requests)


async def test_config_values_of_alter_configs_stay_off_disk(tmp_path: Path) -> None:
    """A broker config may be a password (``sasl.jaas.config``, ``ssl.keystore.password``),
    which Kafka's request log hides: AlterConfigs and IncrementalAlterConfigs are recorded as
    their header and a note."""
    from kio.schema.alter_configs.v2 import request as alter
    from kio.schema.incremental_alter_configs.v1 import request as incremental

    secret = "listener-keystore-secret"
    key = "listener.name.sasl_ssl.ssl.keystore.password"

    async def answers(stream: trio.SocketStream) -> None:
        while True:  # an empty answer of any version: correlation id, throttle, no resources
            frame = await _read_request(stream)
            body = frame[4:8] + b"\x00" * 8
            await stream.send_all(struct.pack(">i", len(body)) + body)

    requests = [
        incremental.IncrementalAlterConfigsRequest(
            resources=(
                incremental.AlterConfigsResource(
                    resource_type=4,
                    resource_name="1",
                    configs=(
                        incremental.AlterableConfig(name=key, config_operation=0, value=secret),
                    ),
                ),
            ),
            validate_only=False,
        ),
        alter.AlterConfigsRequest(
            resources=(
                alter.AlterConfigsResource(
                    resource_type=4,
                    resource_name="1",
                    configs=(alter.AlterableConfig(name=key, value=secret),),
                ),
            ),
            validate_only=False,
        ),
    ]
    async with trio.open_nursery() as nursery:
        up = await _fake_upstream(nursery, answers)
        async with running_proxy(up, record_dir=tmp_path) as (_p, port), connect(port) as c:
            for cid, request in enumerate(requests, 1):
                await c.send_raw(raw(request, cid))
                with trio.fail_after(LIMIT_S):
                    assert await c.read_frame()
        nursery.cancel_scope.cancel()
    (path,) = list(tmp_path.glob("*.kdrec"))  # noqa: ASYNC240  (the proxy has stopped)
    data = path.read_bytes()
    assert secret.encode() not in data
    assert data.count(b"config values not recorded") == len(requests)
