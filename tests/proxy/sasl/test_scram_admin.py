"""KIP-554's decisions (proxy/sasl/scram_admin.py): Kafka's ScramImage.describe and
ScramControlManager.alterCredentials rules, as a table."""

from __future__ import annotations

import hashlib

import pytest
from kio.schema.errors import ErrorCode
from scramp import ScramClient

from proxy.sasl.mechanisms import ScramServer, credential, new_credential
from proxy.sasl.scram_admin import Outcome, Upsert, alter, describe

USERS = {
    "alice": {"SCRAM-SHA-256": new_credential("SCRAM-SHA-256", "a", 4096)},
    "bob": {
        "SCRAM-SHA-256": new_credential("SCRAM-SHA-256", "b", 8192),
        "SCRAM-SHA-512": new_credential("SCRAM-SHA-512", "b", 4096),
    },
}


def test_describe_everyone_or_the_named_ones() -> None:
    assert (
        describe(USERS, None)
        == describe(USERS, [])
        == [
            Outcome("alice", ErrorCode.none, None, ((1, 4096),)),
            Outcome("bob", ErrorCode.none, None, ((1, 8192), (2, 4096))),
        ]
    )
    got = describe(USERS, ["bob", "carol", "bob"])
    assert [(o.user, o.code) for o in got] == [
        ("bob", ErrorCode.duplicate_resource),
        ("carol", ErrorCode.resource_not_found),
    ]
    assert got[
        1
    ].message == "Attempt to delete a user credential that does not exist: carol".replace(
        "delete", "describe"
    )


def up(name: str, mech: int = 1, iterations: int = 4096) -> Upsert:
    return Upsert(name, mech, iterations, b"salt", b"x" * 32)


def test_alter_rules_and_messages() -> None:
    sets, deletes, outcomes = alter(
        USERS,
        [("alice", 1), ("nobody", 1), ("bob", 2), ("", 1), ("alice", 2)],
        [up("carol"), up("dave", 3), up("erin", 1, 100), up("frank", 2, 20000), up("bob")],
    )
    table = {o.user: (o.code, o.message) for o in outcomes}
    twice = "A user credential cannot be altered twice in the same request"
    assert table == {
        "carol": (ErrorCode.none, None),
        "alice": (ErrorCode.duplicate_resource, twice),  # named twice, mechanisms aside
        "nobody": (
            ErrorCode.resource_not_found,
            "Attempt to delete a user credential that does not exist",
        ),
        "bob": (ErrorCode.duplicate_resource, twice),  # a deletion and an upsertion
        "": (ErrorCode.unacceptable_credential, "Username must not be empty"),
        "dave": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        "erin": (ErrorCode.unacceptable_credential, "Too few iterations"),
        "frank": (ErrorCode.unacceptable_credential, "Too many iterations"),
    }
    assert [(n, m) for n, m, _ in sets] == [("carol", "SCRAM-SHA-256")] and deletes == []


def test_an_upserted_credential_logs_the_user_in() -> None:
    # what a client sends: SaltedPassword = PBKDF2(password, salt, iterations) (RFC 5802 Hi)
    salted = hashlib.pbkdf2_hmac("sha512", b"pw", b"NaCl", 4096)
    cred = credential("SCRAM-SHA-512", b"NaCl", salted, 4096)
    server = ScramServer("SCRAM-SHA-512", lambda user: cred if user == "zoe" else None)
    client = ScramClient(["SCRAM-SHA-512"], "zoe", "pw")
    client.set_server_first(server.step(client.get_client_first().encode()).decode())
    client.set_server_final(server.step(client.get_client_final().encode()).decode())
    assert server.complete


async def test_concurrent_changes_all_reach_the_store_and_the_copy() -> None:
    """Two AlterUserScramCredentials at once (reproduced on the file backend: 30 at once,
    some answered KAFKA_STORAGE_ERROR and acknowledged users lost)."""
    import trio

    from proxy.sasl.mechanisms import new_credential
    from proxy.sasl.scram_store import BLOB, ScramStore, decode

    class SlowStore:
        def __init__(self) -> None:
            self.blobs: dict[str, bytes] = {}
            self.writing = False

        async def read_metadata(self, name: str) -> bytes | None:
            return self.blobs.get(name)

        async def write_metadata(self, name: str, data: bytes) -> None:
            assert not self.writing, "two writes of one blob at once"
            self.writing = True
            await trio.sleep(0.01)  # a write that takes a while (an fsync in a thread)
            self.blobs[name] = data
            self.writing = False

    backing = SlowStore()
    store = ScramStore(backing)
    await store.load()
    cred = new_credential("SCRAM-SHA-256", "pw")
    async with trio.open_nursery() as nursery:
        for i in range(5):
            nursery.start_soon(store.apply, [(f"u{i}", "SCRAM-SHA-256", cred)], [])
    assert sorted(store.users()) == [f"u{i}" for i in range(5)]
    assert sorted(decode(backing.blobs[BLOB])) == [f"u{i}" for i in range(5)]


async def test_a_damaged_blob_is_a_storage_error_naming_it() -> None:
    """kafkad serve prints a StorageError as one line; a damaged blob was a traceback
    (reproduced with the blob two racing writes left: JSON with extra data)."""
    from proxy.sasl.scram_store import BLOB, ScramStore
    from storage.api import StorageError
    from storage.memory import MemoryStore

    backing = MemoryStore()
    await backing.write_metadata(BLOB, b'{"version": 1, "users": {}}}')
    with pytest.raises(StorageError, match="SCRAM credentials"):
        await ScramStore(backing).load()


async def test_concurrent_alters_are_each_decided_on_the_users_the_previous_one_left() -> None:
    """Two requests deleting one credential at once: the second finds it gone
    (RESOURCE_NOT_FOUND), as Kafka's controller decides one request after another."""
    import trio

    from proxy.sasl.scram_store import ScramStore
    from storage.memory import MemoryStore

    class SlowStore(MemoryStore):
        async def write_metadata(self, name: str, data: bytes) -> None:
            await trio.sleep(0.01)  # an fsync in a thread
            await super().write_metadata(name, data)

    store = ScramStore(SlowStore())
    await store.apply([("u", "SCRAM-SHA-256", new_credential("SCRAM-SHA-256", "pw"))], [])
    codes: list[ErrorCode] = []

    async def delete() -> None:
        outcomes = await store.change(lambda users: alter(users, [("u", 1)], []))
        codes.extend(o.code for o in outcomes)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(delete)
        nursery.start_soon(delete)
    assert sorted(codes) == [ErrorCode.none, ErrorCode.resource_not_found]
    assert store.users() == {}
