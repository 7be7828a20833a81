"""DescribeClientQuotas and AlterClientQuotas on the wire (v0 and v1), their authorization,
validate_only, and the quotas across a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from kio.schema.alter_client_quotas.v0 import request as aq0
from kio.schema.alter_client_quotas.v1 import request as aq1
from kio.schema.describe_client_quotas.v0 import request as dq0
from kio.schema.describe_client_quotas.v1 import request as dq1
from kio.schema.errors import ErrorCode
from kio.static.primitive import f64, i8

from tests.proxy.acl.harness import Op, Type, secured
from tests.proxy.harness import RawClient, connect, running_broker

E = ErrorCode


def alter_req(
    mod: Any,
    entity: list[tuple[str, str | None]],
    ops: list[tuple[str, float | None]],
    *,
    validate_only: bool = False,
) -> Any:
    return mod.AlterClientQuotasRequest(
        entries=(
            mod.EntryData(
                entity=tuple(mod.EntityData(entity_type=t, entity_name=n) for t, n in entity),
                ops=tuple(
                    mod.OpData(key=k, value=f64(0.0 if v is None else v), remove=v is None)
                    for k, v in ops
                ),
            ),
        ),
        validate_only=validate_only,
    )


def describe_req(
    mod: Any, components: list[tuple[str, int, str | None]], strict: bool = False
) -> Any:
    return mod.DescribeClientQuotasRequest(
        components=tuple(
            mod.ComponentData(entity_type=t, match_type=i8(m), match=s) for t, m, s in components
        ),
        strict=strict,
    )


async def described(c: RawClient, mod: Any = dq1, components: list[Any] | None = None) -> Any:
    resp = await c.request(describe_req(mod, components or []))
    assert (resp.error_code, resp.error_message) == (E.none, None)
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: float(v.value) for v in entry.values
        }
        for entry in resp.entries
    }


@pytest.mark.parametrize(("amod", "dmod"), [(aq0, dq0), (aq1, dq1)])
async def test_alter_then_describe(amod: Any, dmod: Any) -> None:
    with trio.fail_after(20):
        async with running_broker() as (_, port), connect(port) as c:
            resp = await c.request(
                alter_req(
                    amod, [("user", "alice"), ("client-id", None)], [("producer_byte_rate", 1024.0)]
                )
            )
            (entry,) = resp.entries
            assert (entry.error_code, entry.error_message) == (E.none, None)
            assert [(e.entity_type, e.entity_name) for e in entry.entity] == [
                ("client-id", None),
                ("user", "alice"),
            ]
            assert await described(c, dmod) == {
                (("client-id", None), ("user", "alice")): {"producer_byte_rate": 1024.0}
            }
            exact = [("user", 0, "alice")]
            assert await described(c, dmod, exact) != {}
            resp = await c.request(describe_req(dmod, exact, strict=True))
            assert resp.entries == ()
            await c.request(
                alter_req(
                    amod, [("client-id", None), ("user", "alice")], [("producer_byte_rate", None)]
                )
            )
            assert await described(c, dmod) == {}


async def test_validation_errors_and_validate_only() -> None:
    with trio.fail_after(20):
        async with running_broker() as (_, port), connect(port) as c:
            resp = await c.request(alter_req(aq1, [("user", "a")], [("producer_byte_rate", 1.5)]))
            assert [(e.error_code, e.error_message) for e in resp.entries] == [
                (E.invalid_request, "producer_byte_rate cannot be a fractional value.")
            ]
            resp = await c.request(
                alter_req(aq1, [("user", "a")], [("producer_byte_rate", 100.0)], validate_only=True)
            )
            assert [e.error_code for e in resp.entries] == [E.none]
            assert await described(c) == {}
            resp = await c.request(
                alter_req(
                    aq1, [("ip", "no-such-host.invalid")], [("connection_creation_rate", 5.0)]
                )
            )
            assert [(e.error_code, e.error_message) for e in resp.entries] == [
                (E.invalid_request, "no-such-host.invalid is not a valid IP or resolvable host.")
            ]
            resp = await c.request(
                alter_req(aq1, [("ip", "127.0.0.1")], [("connection_creation_rate", 5.0)])
            )
            assert [e.error_code for e in resp.entries] == [E.none]
            bad = await c.request(describe_req(dq1, [("ip", 2, None), ("user", 2, None)]))
            assert (bad.error_code, bad.entries) == (E.invalid_request, None)
            assert bad.error_message.startswith("Invalid entity filter component combination.")


async def test_authorization() -> None:
    with trio.fail_after(20):
        async with secured() as (c, grants, _):
            grants.open = False
            resp = await c.request(describe_req(dq1, []))
            assert (resp.error_code, resp.error_message, resp.entries) == (
                E.cluster_authorization_failed,
                "Cluster authorization failed.",
                None,
            )
            resp = await c.request(alter_req(aq1, [("user", "a")], [("producer_byte_rate", 1.0)]))
            assert [(e.error_code, e.error_message) for e in resp.entries] == [
                (E.cluster_authorization_failed, "Cluster authorization failed.")
            ]
            assert [(e.entity_type, e.entity_name) for e in resp.entries[0].entity] == [
                ("user", "a")
            ]
            grants.grant(Op.ALTER_CONFIGS, Type.CLUSTER)
            resp = await c.request(alter_req(aq1, [("user", "a")], [("producer_byte_rate", 1.0)]))
            assert [e.error_code for e in resp.entries] == [E.none]
            grants.grant(Op.DESCRIBE_CONFIGS, Type.CLUSTER)
            assert await described(c) == {(("user", "a"),): {"producer_byte_rate": 1.0}}


async def test_quotas_survive_a_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with trio.fail_after(20):
        async with running_broker(data) as (_, port), connect(port) as c:
            await c.request(alter_req(aq1, [("user", None)], [("consumer_byte_rate", 2048.0)]))
            await c.request(alter_req(aq1, [("client-id", "c1")], [("request_percentage", 12.5)]))
        async with running_broker(data) as (_, port), connect(port) as c:
            assert await described(c) == {
                (("user", None),): {"consumer_byte_rate": 2048.0},
                (("client-id", "c1"),): {"request_percentage": 12.5},
            }


async def test_a_hung_ip_lookup_holds_none_of_the_storage_threads(monkeypatch: Any) -> None:
    """A name lookup that hangs past its timeout keeps its thread until the resolver gives up;
    it must not hold a token of trio's default thread limiter, which the storage's fsyncs
    and reads share."""
    import socket
    import threading

    from proxy.handlers import client_quotas

    release = threading.Event()
    real = socket.getaddrinfo

    def hanging(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,
                flags: int = 0) -> Any:  # fmt: skip
        if flags & socket.AI_NUMERICHOST:
            return real(host, port, family, type, proto, flags)
        release.wait(10)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    monkeypatch.setattr(client_quotas, "RESOLVE_TIMEOUT_S", 0.05)
    monkeypatch.setattr(client_quotas, "_RESOLVERS", trio.CapacityLimiter(1))  # its own
    try:
        assert not await client_quotas._resolves("hangs.example")
        assert trio.to_thread.current_default_thread_limiter().borrowed_tokens == 0
    finally:
        release.set()
