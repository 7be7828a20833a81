"""The durable ACL store (proxy/acl/store.py) and its authorizer configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.acl.authorizer import StandardAuthorizer
from proxy.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from proxy.acl.store import AclStore, decode, encode
from proxy.config import load_config
from proxy.principal import KafkaPrincipal
from proxy.properties_file import ConfigError
from storage.backends import open_store

A = AclBinding(
    ResourcePattern(ResourceType.TOPIC, "orders", PatternType.PREFIXED),
    AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
)
B = AclBinding(
    ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL),
    AccessControlEntry("User:*", "10.0.0.1", AclOperation.WRITE, AclPermissionType.DENY),
)


def test_round_trip() -> None:
    assert decode(encode([A, B])) == [A, B]
    with pytest.raises(ValueError, match="unknown version"):
        decode(b'{"version": 2, "acls": []}')


async def test_changes_are_durable_and_reach_the_listeners(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    async with open_store(url) as store:
        acls = AclStore(store)
        seen: list[tuple[AclBinding, ...]] = []
        acls.listeners.append(lambda b: seen.append(tuple(b)))
        await acls.load()
        await acls.replace([A, B, A])
        assert acls.bindings == (A, B)
        assert seen == [(), (A, B)]
    async with open_store(url) as store:  # a new process: what was acknowledged is there
        again = AclStore(store)
        authorizer = StandardAuthorizer()
        again.listeners.append(authorizer.set_acls)
        await again.load()
        assert again.bindings == (A, B)
        alice = KafkaPrincipal("User", "alice")
        assert authorizer.authorize(
            alice, "1.2.3.4", AclOperation.READ, ResourceType.TOPIC, "orders-1"
        )


def config(**values: str) -> dict[str, object]:
    cfg = load_config(
        listen="127.0.0.1:0",
        advertise=None,
        data_dir="memory://",
        config_file=None,
        overrides=values,
        environ={},
    )
    assert cfg.values is not None
    return dict(cfg.values)


def test_authorizer_class_names() -> None:
    assert config()["authorizer.class.name"] == ""
    std = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert config(**{"authorizer.class.name": std})["authorizer.class.name"] == std
    with pytest.raises(
        ConfigError, match=r"Kafka 4\.0 removed kafka\.security\.authorizer\.AclAuthorizer"
    ):
        config(**{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    with pytest.raises(ConfigError, match=r"kafkad has no authorizer class com\.example\.Mine"):
        config(**{"authorizer.class.name": "com.example.Mine"})
    with pytest.raises(ConfigError, match="principalType:principalName but got admin"):
        config(**{"super.users": "User:root;admin"})
