"""Delegation tokens over a SASL_PLAINTEXT listener, with raw requests on in-memory streams:
the four APIs at every version, SCRAM with ``tokenauth=true``, the refusals, and tokens kept
in the data dir across a restart."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.create_delegation_token.v1 import request as create1
from kio.schema.create_delegation_token.v2 import request as create2
from kio.schema.create_delegation_token.v3 import request as create3
from kio.schema.describe_delegation_token.v1 import request as describe1
from kio.schema.describe_delegation_token.v3 import request as describe3
from kio.schema.errors import ErrorCode
from kio.schema.expire_delegation_token.v1 import request as expire1
from kio.schema.expire_delegation_token.v2 import request as expire2
from kio.schema.renew_delegation_token.v1 import request as renew1
from kio.schema.renew_delegation_token.v2 import request as renew2
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from scramp import ScramClient

from proxy.config import load_config
from proxy.sasl.mechanisms import new_credential
from proxy.server import Server
from tests.proxy.harness import RawClient, encode_request
from tests.proxy.test_server_timeouts import MemoryListener
from wire.values import ms64

KEY = "token-secret"
SASL = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:9092",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    "delegation.token.secret.key": KEY,
}
MECH = "SCRAM-SHA-256"


@asynccontextmanager
async def broker(data_dir: str = "memory://", **overrides: str) -> AsyncIterator[MemoryListener]:
    cfg = load_config(
        listen=None,
        advertise=None,
        data_dir=data_dir,
        config_file=None,
        overrides={**SASL, **overrides},
        environ={},
    )
    listener = MemoryListener()
    server = Server(cfg, listeners={cfg.endpoints()[0].name: [listener]})
    listener.server = server  # type: ignore[attr-defined]  # for tests that reach the broker
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        assert server.broker is not None
        if not server.broker.scram.users():
            creds = [(u, MECH, new_credential(MECH, f"{u}-secret")) for u in ("alice", "bob")]
            await server.broker.scram.apply(creds, [])
        try:
            yield listener
        finally:
            server.stop()


async def login(
    listener: MemoryListener, user: str, password: str, tokenauth: bool = False
) -> tuple[RawClient, Any]:
    """A SCRAM exchange by hand (scramp's client, the extension appended to client-first)."""
    c = RawClient(await listener.connect())  # type: ignore[arg-type]
    assert (await c.request(SaslHandshakeRequest(mechanism=MECH))).error_code == 0
    client = ScramClient([MECH], user, password)
    first = client.get_client_first()
    if tokenauth:
        first += ",tokenauth=true"
        client.client_first_bare += ",tokenauth=true"
    out = await c.request(SaslAuthenticateRequest(auth_bytes=first.encode()))
    if out.error_code != 0:  # an unknown user or token fails here, as in Kafka
        return c, out
    client.set_server_first(out.auth_bytes.decode())
    final = await c.request(SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))
    if final.error_code == 0:
        client.set_server_final(final.auth_bytes.decode())
    return c, final


def create_v3(**kw: Any) -> create3.CreateDelegationTokenRequest:
    args: dict[str, Any] = {
        "owner_principal_type": None,
        "owner_principal_name": None,
        "renewers": (),
        "max_lifetime": ms64(-1),
    }
    return create3.CreateDelegationTokenRequest(**{**args, **kw})


async def refused_create(c: RawClient, req: Any) -> tuple[int, bytes]:
    """(error code, the body) of a CreateDelegationToken answer kio cannot read: its
    timestamps are -1 (kio refuses negative timestamps)."""
    await c.stream.send_all(encode_request(req, 999))
    frame = await c.read_frame()
    assert frame is not None
    body = frame[5:] if req.__flexible__ else frame[4:]  # after the response header
    return int.from_bytes(body[:2], "big", signed=True), body


def password(hmac_bytes: bytes) -> str:
    return base64.b64encode(hmac_bytes).decode()


async def test_create_then_authenticate_with_the_token() -> None:
    async with broker() as listener:
        alice, ok = await login(listener, "alice", "alice-secret")
        assert ok.error_code == 0
        made = await alice.request(
            create_v3(
                renewers=(create3.CreatableRenewers(principal_type="User", principal_name="bob"),)
            )
        )
        assert made.error_code == ErrorCode.none
        assert (made.principal_type, made.principal_name) == ("User", "alice")
        assert made.token_requester_principal_name == "alice"
        assert made.hmac == hmac.new(KEY.encode(), made.token_id.encode(), hashlib.sha512).digest()
        life = made.expiry_timestamp - made.issue_timestamp
        assert life.total_seconds() == 86400  # delegation.token.expiry.time.ms
        assert (made.max_timestamp - made.issue_timestamp).total_seconds() == 7 * 86400

        tok, ok = await login(listener, made.token_id, password(made.hmac), tokenauth=True)
        assert ok.error_code == ErrorCode.none, ok.error_message
        # the session ends when the token expires
        assert 86300 < ok.session_lifetime.total_seconds() <= 86400
        # a token-authenticated connection may not manage tokens
        code, body = await refused_create(tok, create_v3())
        assert code == ErrorCode.delegation_token_request_not_allowed
        # owner and requester User:alice, timestamps -1, an empty id and HMAC
        assert body[2:].startswith(b"\x05User\x06alice" * 2 + b"\xff" * 24 + b"\x01\x01")
        described = await tok.request(describe3.DescribeDelegationTokenRequest(owners=None))
        assert described.error_code == ErrorCode.delegation_token_request_not_allowed

        # the owner sees it; bob (a renewer) too; hmac and renewers shown
        for who in (alice, (await login(listener, "bob", "bob-secret"))[0]):
            seen = await who.request(describe3.DescribeDelegationTokenRequest(owners=None))
            assert [t.token_id for t in seen.tokens] == [made.token_id]
            assert seen.tokens[0].hmac == made.hmac
            assert [r.principal_name for r in seen.tokens[0].renewers] == ["bob"]

        # without the extension the token id is no user; a wrong HMAC fails
        _, no_ext = await login(listener, made.token_id, password(made.hmac))
        assert no_ext.error_code == ErrorCode.sasl_authentication_failed
        _, wrong = await login(listener, made.token_id, password(b"x" * 64), tokenauth=True)
        assert wrong.error_code == ErrorCode.sasl_authentication_failed


async def test_renew_and_expire_by_hmac() -> None:
    async with broker() as listener:
        alice, _ = await login(listener, "alice", "alice-secret")
        bob, _ = await login(listener, "bob", "bob-secret")
        made = await alice.request(create_v3())
        renewed = await alice.request(
            renew2.RenewDelegationTokenRequest(hmac=made.hmac, renew_period=ms64(60_000))
        )
        assert renewed.error_code == ErrorCode.none
        assert 59 < (renewed.expiry_timestamp - made.issue_timestamp).total_seconds() < 70
        mismatch = await bob.request(
            renew1.RenewDelegationTokenRequest(hmac=made.hmac, renew_period=ms64(-1))
        )
        assert mismatch.error_code == ErrorCode.delegation_token_owner_mismatch
        unknown = await alice.request(
            expire2.ExpireDelegationTokenRequest(hmac=b"nope", expiry_time_period=ms64(-1))
        )
        assert unknown.error_code == ErrorCode.delegation_token_not_found
        gone = await alice.request(
            expire1.ExpireDelegationTokenRequest(hmac=made.hmac, expiry_time_period=ms64(-1))
        )
        assert gone.error_code == ErrorCode.none
        seen = await alice.request(describe1.DescribeDelegationTokenRequest(owners=None))
        assert seen.tokens == ()
        _, failed = await login(listener, made.token_id, password(made.hmac), tokenauth=True)
        assert failed.error_code == ErrorCode.sasl_authentication_failed


@pytest.mark.parametrize("request_module", [create1, create2, create3])
async def test_create_at_every_version(request_module: Any) -> None:
    async with broker() as listener:
        alice, _ = await login(listener, "alice", "alice-secret")
        fields: dict[str, Any] = {"renewers": (), "max_lifetime": ms64(3_600_000)}
        if request_module is create3:
            fields |= {"owner_principal_type": None, "owner_principal_name": None}
        made = await alice.request(request_module.CreateDelegationTokenRequest(**fields))
        assert made.error_code == ErrorCode.none and made.principal_name == "alice"
        assert (made.max_timestamp - made.issue_timestamp).total_seconds() == 3600


async def test_on_behalf_of_another_user_needs_create_tokens() -> None:
    acl = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
    }
    async with broker(**acl) as listener:
        alice, _ = await login(listener, "alice", "alice-secret")
        code, body = await refused_create(
            alice, create_v3(owner_principal_type="User", owner_principal_name="carol")
        )
        assert code == ErrorCode.delegation_token_authorization_failed
        assert body[2:].startswith(b"\x05User\x06carol\x05User\x06alice" + b"\xff" * 24)
        own = await alice.request(create_v3())  # for oneself: no ACL needed
        assert own.error_code == ErrorCode.none


async def test_off_without_a_secret_key_and_refused_on_plaintext() -> None:
    async with broker(**{"delegation.token.secret.key": ""}) as listener:
        alice, _ = await login(listener, "alice", "alice-secret")
        off = await alice.request(create_v3())
        assert off.error_code == ErrorCode.delegation_token_auth_disabled
        assert off.issue_timestamp.timestamp() == 0  # the controller's defaults
        described = await alice.request(describe3.DescribeDelegationTokenRequest(owners=None))
        assert described.error_code == ErrorCode.delegation_token_auth_disabled
    plain = {"listeners": "PLAINTEXT://127.0.0.1:9092"}
    async with broker(**plain) as listener:
        c = RawClient(await listener.connect())  # type: ignore[arg-type]
        code, _ = await refused_create(c, create_v3())
        assert code == ErrorCode.delegation_token_request_not_allowed


async def test_tokens_survive_a_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    async with broker(data) as listener:
        alice, _ = await login(listener, "alice", "alice-secret")
        made = await alice.request(create_v3())
    async with broker(data) as listener:
        _, ok = await login(listener, made.token_id, password(made.hmac), tokenauth=True)
        assert ok.error_code == ErrorCode.none
