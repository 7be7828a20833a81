"""The authorizer's decision table, case by case as Kafka's StandardAuthorizerTest
(metadata/src/test/java/org/apache/kafka/metadata/authorizer/StandardAuthorizerTest.java)."""

from __future__ import annotations

import random

import pytest

from proxy.acl.authorizer import (
    StandardAuthorizer,
    entry_result,
    java_bool,
    java_host_address,
    parse_super_users,
)
from proxy.acl.filters import (
    ANY_BINDING,
    AccessControlEntryFilter,
    AclBindingFilter,
    ResourcePatternFilter,
)
from proxy.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from proxy.principal import KafkaPrincipal

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
ALLOW, DENY = Perm.ALLOW, Perm.DENY
LITERAL, PREFIXED = PT.LITERAL, PT.PREFIXED
TOPIC, GROUP = RT.TOPIC, RT.GROUP
LOCAL = "127.0.0.1"


def acl(
    rtype: ResourceType,
    name: str,
    ptype: PatternType,
    principal: str,
    host: str,
    op: AclOperation,
    perm: AclPermissionType,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, ptype), AccessControlEntry(principal, host, op, perm)
    )


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal("User", name)


def decide(
    a: StandardAuthorizer,
    who: str,
    actions: list[tuple[AclOperation, ResourceType, str]],
    host: str = LOCAL,
) -> list[bool]:
    return [a.authorize(user(who), host, op, rt, name) for op, rt, name in actions]


def authorizer(*acls: AclBinding, allow_if_no_acl: bool = False) -> StandardAuthorizer:
    return StandardAuthorizer({"User:superman"}, allow_if_no_acl, acls)


def test_get_configured_super_users() -> None:
    assert parse_super_users("") == frozenset()
    assert parse_super_users(" ") == frozenset()
    assert parse_super_users("User:bob;User:alice ") == {"User:bob", "User:alice"}
    assert parse_super_users(";  User:bob  ;  User:alice ") == {"User:bob", "User:alice"}
    with pytest.raises(ValueError, match=r"principalType:principalName but got bob$"):
        parse_super_users("bob;:alice")


def test_get_default_result() -> None:
    assert StandardAuthorizer.from_config({}).allow_if_no_acl is False
    assert StandardAuthorizer.from_config(
        {"allow.everyone.if.no.acl.found": "true"}
    ).allow_if_no_acl
    assert not StandardAuthorizer.from_config(
        {"allow.everyone.if.no.acl.found": "false"}
    ).allow_if_no_acl
    assert [java_bool(v) for v in ("TRUE", " true ", "yes", "1", "")] == [
        True,
        True,
        False,
        False,
        False,
    ]


def test_configure() -> None:
    a = StandardAuthorizer.from_config(
        {"super.users": "User:alice;User:chris", "allow.everyone.if.no.acl.found": "true"}
    )
    assert a.super_users == {"User:alice", "User:chris"}
    assert a.allow_if_no_acl is True


@pytest.mark.parametrize("allow_if_no_acl", [True, False])
def test_allow_everyone_if_no_acl_found(allow_if_no_acl: bool) -> None:
    a = StandardAuthorizer(
        {"User:alice", "User:chris"},
        allow_if_no_acl,
        [acl(TOPIC, "topic1", LITERAL, "User:Alice", "*", Op.READ, ALLOW)],
    )
    # topic1 has an ACL (for someone else): denied whatever the default
    assert decide(a, "Bob", [(Op.READ, TOPIC, "topic1")]) == [False]
    # topic2 has none: the default decides
    assert decide(a, "Bob", [(Op.READ, TOPIC, "topic2")]) == [allow_if_no_acl]


def foo_acl(op: AclOperation, perm: AclPermissionType) -> AccessControlEntry:
    return AccessControlEntry("User:bob", "*", op, perm)


BOB = user("bob")


def test_find_result_implication() -> None:
    for op in (Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):  # these imply DESCRIBE
        assert entry_result(Op.DESCRIBE, BOB, LOCAL, foo_acl(op, ALLOW)) is True
    assert entry_result(Op.DESCRIBE, BOB, LOCAL, foo_acl(Op.CREATE, ALLOW)) is None
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):  # DENY implies nothing
        assert entry_result(Op.DESCRIBE, BOB, LOCAL, foo_acl(op, DENY)) is None
    assert entry_result(Op.DESCRIBE, BOB, LOCAL, foo_acl(Op.DESCRIBE, DENY)) is False
    for op in (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
        assert entry_result(Op.DESCRIBE_CONFIGS, BOB, LOCAL, foo_acl(op, ALLOW)) is True
    assert entry_result(Op.DESCRIBE_CONFIGS, BOB, LOCAL, foo_acl(Op.ALTER_CONFIGS, DENY)) is None
    assert entry_result(Op.ALTER_CONFIGS, BOB, LOCAL, foo_acl(Op.ALTER_CONFIGS, DENY)) is False
    # an implication goes one way only: DESCRIBE does not grant READ
    assert entry_result(Op.READ, BOB, LOCAL, foo_acl(Op.DESCRIBE, ALLOW)) is None


def test_find_result_principal_matching() -> None:
    assert entry_result(Op.READ, BOB, LOCAL, foo_acl(Op.READ, ALLOW)) is True
    assert entry_result(Op.READ, user("alice"), LOCAL, foo_acl(Op.READ, ALLOW)) is None
    wildcard = AccessControlEntry("User:*", "*", Op.READ, DENY)
    assert entry_result(Op.READ, user("alice"), LOCAL, wildcard) is False
    # "User:*" matches every principal, whatever its type; "Group:*" is no wildcard
    assert entry_result(Op.READ, KafkaPrincipal("Group", "x"), LOCAL, wildcard) is False
    group_star = AccessControlEntry("Group:*", "*", Op.READ, DENY)
    assert entry_result(Op.READ, KafkaPrincipal("Group", "x"), LOCAL, group_star) is None


def test_list_acls() -> None:
    foo = [acl(TOPIC, "foo_", PREFIXED, "User:bob", "*", op, ALLOW) for op in (Op.READ, Op.WRITE)]
    bar = [
        acl(GROUP, "bar", LITERAL, "User:*", "*", op, DENY)
        for op in (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
    ]
    a = authorizer(*foo, *bar)
    assert a.acls(ANY_BINDING) == [*foo, *bar]
    a.set_acls([foo[0], *bar])
    assert a.acls(ANY_BINDING) == [foo[0], *bar]
    topics = AclBindingFilter(
        ResourcePatternFilter(TOPIC, None, PT.ANY),
        AccessControlEntryFilter(None, None, Op.ANY, Perm.ANY),
    )
    assert a.acls(topics) == [foo[0]]


def test_simple_authorizations() -> None:
    a = authorizer(
        acl(TOPIC, "foo_", PREFIXED, "User:bob", "*", Op.READ, ALLOW),
        acl(TOPIC, "foo_", PREFIXED, "User:bob", "*", Op.WRITE, ALLOW),
        acl(GROUP, "bar", LITERAL, "User:*", "*", Op.DESCRIBE_CONFIGS, ALLOW),
        acl(GROUP, "bar", LITERAL, "User:*", "*", Op.ALTER_CONFIGS, ALLOW),
    )
    assert decide(a, "bob", [(Op.READ, TOPIC, "foo_")]) == [True]
    assert decide(a, "fred", [(Op.ALTER_CONFIGS, GROUP, "bar")]) == [True]


def test_deny_precedence_with_operation_all() -> None:
    a = authorizer(
        acl(TOPIC, "foo", LITERAL, "User:alice", "*", Op.ALL, DENY),
        acl(TOPIC, "foo", PREFIXED, "User:alice", "*", Op.READ, ALLOW),
        acl(TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, DENY),
        acl(TOPIC, "foo", PREFIXED, "User:*", "*", Op.DESCRIBE, ALLOW),
    )
    alice = [
        (Op.WRITE, TOPIC, "foo"),
        (Op.READ, TOPIC, "foo"),
        (Op.DESCRIBE, TOPIC, "foo"),
        (Op.READ, TOPIC, "foobar"),
    ]
    assert decide(a, "alice", alice) == [False, False, False, True]
    bob = [
        (Op.DESCRIBE, TOPIC, "foo"),
        (Op.READ, TOPIC, "foo"),
        (Op.WRITE, TOPIC, "foo"),
        (Op.DESCRIBE, TOPIC, "foobaz"),
        (Op.READ, TOPIC, "foobaz"),
    ]
    assert decide(a, "bob", bob) == [False, False, False, True, False]


def test_topic_acl_with_operation_all() -> None:
    a = authorizer(
        acl(TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, ALLOW),
        acl(TOPIC, "bar", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
        acl(TOPIC, "baz", LITERAL, "User:bob", "*", Op.ALL, ALLOW),
    )
    assert decide(
        a,
        "alice",
        [
            (Op.WRITE, TOPIC, "foo"),
            (Op.DESCRIBE_CONFIGS, TOPIC, "bar"),
            (Op.DESCRIBE, TOPIC, "baz"),
        ],
    ) == [True, True, False]
    assert decide(
        a, "bob", [(Op.WRITE, TOPIC, "foo"), (Op.READ, TOPIC, "bar"), (Op.DESCRIBE, TOPIC, "baz")]
    ) == [True, False, True]
    assert decide(
        a,
        "malory",
        [(Op.DESCRIBE, TOPIC, "foo"), (Op.WRITE, TOPIC, "bar"), (Op.READ, TOPIC, "baz")],
    ) == [True, False, False]


def test_host_address_acl_validation() -> None:
    host1, host2 = "192.168.1.1", "192.168.1.2"
    a = authorizer(
        acl(TOPIC, "foo", LITERAL, "User:alice", host1, Op.READ, DENY),
        acl(TOPIC, "foo", LITERAL, "User:alice", "*", Op.READ, ALLOW),
        acl(TOPIC, "bar", LITERAL, "User:bob", host2, Op.READ, ALLOW),
        acl(TOPIC, "bar", LITERAL, "User:*", LOCAL, Op.DESCRIBE, ALLOW),
    )
    actions = [(Op.READ, TOPIC, "foo"), (Op.READ, TOPIC, "bar"), (Op.DESCRIBE, TOPIC, "bar")]
    assert decide(a, "alice", actions, LOCAL) == [True, False, True]
    assert decide(a, "alice", actions, host1) == [False, False, False]
    assert decide(a, "alice", actions, host2) == [True, False, False]
    assert decide(a, "bob", actions, LOCAL) == [False, False, True]
    assert decide(a, "bob", actions, host1) == [False, False, False]
    assert decide(a, "bob", actions, host2) == [False, True, True]


def test_hosts_are_compared_in_javas_form() -> None:
    assert java_host_address("::1") == "0:0:0:0:0:0:0:1"
    assert java_host_address("fe80::1%eth0") == "fe80:0:0:0:0:0:0:1%eth0"
    assert java_host_address("::ffff:10.0.0.1") == "10.0.0.1"
    assert java_host_address("10.0.0.1") == "10.0.0.1"
    a = authorizer(acl(TOPIC, "t", LITERAL, "User:bob", "0:0:0:0:0:0:0:1", Op.READ, ALLOW))
    assert decide(a, "bob", [(Op.READ, TOPIC, "t")], "::1") == [True]


def many_acls() -> StandardAuthorizer:
    return authorizer(
        acl(TOPIC, "green2", LITERAL, "User:*", "*", Op.READ, ALLOW),
        acl(TOPIC, "green", PREFIXED, "User:bob", "*", Op.READ, ALLOW),
        acl(TOPIC, "betamax4", LITERAL, "User:bob", "*", Op.READ, ALLOW),
        acl(TOPIC, "betamax", LITERAL, "User:bob", "*", Op.READ, ALLOW),
        acl(TOPIC, "beta", PREFIXED, "User:*", "*", Op.READ, ALLOW),
        acl(TOPIC, "alpha", PREFIXED, "User:*", "*", Op.READ, ALLOW),
        acl(TOPIC, "alp", PREFIXED, "User:bob", "*", Op.READ, DENY),
        acl(GROUP, "*", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
        acl(GROUP, "wheel", LITERAL, "User:*", "*", Op.WRITE, DENY),
    )


def test_authorization_with_many_acls() -> None:
    a = many_acls()
    assert decide(a, "bob", [(Op.READ, TOPIC, "green1"), (Op.WRITE, GROUP, "wheel")]) == [
        True,
        False,
    ]
    assert decide(
        a,
        "bob",
        [(Op.READ, TOPIC, "alpha"), (Op.WRITE, GROUP, "arbitrary"), (Op.READ, TOPIC, "ala")],
    ) == [False, True, False]


def test_prefix_acls() -> None:
    a = authorizer(
        acl(TOPIC, "fooa", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
        acl(TOPIC, "foobar", LITERAL, "User:bob", "*", Op.ALL, ALLOW),
        acl(TOPIC, "f", PREFIXED, "User:bob", "*", Op.ALL, ALLOW),
    )
    assert decide(
        a,
        "bob",
        [(Op.WRITE, TOPIC, "foobarr"), (Op.READ, TOPIC, "goobar"), (Op.READ, TOPIC, "fooa")],
    ) == [True, False, True]
    assert decide(
        a,
        "alice",
        [(Op.DESCRIBE, TOPIC, "fooa"), (Op.WRITE, TOPIC, "bar"), (Op.READ, TOPIC, "baz")],
    ) == [True, False, False]


def test_super_users_are_allowed_whatever_the_acls_say() -> None:
    a = authorizer(acl(TOPIC, "*", LITERAL, "User:*", "*", Op.ALL, DENY))
    assert decide(
        a, "superman", [(Op.WRITE, TOPIC, "x"), (Op.CLUSTER_ACTION, RT.CLUSTER, "kafka-cluster")]
    ) == [True, True]
    assert decide(a, "bob", [(Op.WRITE, TOPIC, "x")]) == [False]
    # the principal's string form is what super.users lists: another type is another principal
    assert not a.authorize(KafkaPrincipal("Group", "superman"), LOCAL, Op.WRITE, TOPIC, "x")


def test_wildcard_resource_applies_to_every_name_of_its_type_only() -> None:
    a = authorizer(acl(TOPIC, "*", LITERAL, "User:bob", "*", Op.READ, ALLOW))
    assert decide(
        a, "bob", [(Op.READ, TOPIC, "any"), (Op.READ, GROUP, "any"), (Op.WRITE, TOPIC, "any")]
    ) == [True, False, False]
    # a PREFIXED "*" is no wildcard: it matches names starting with "*"
    b = authorizer(acl(TOPIC, "*", PREFIXED, "User:bob", "*", Op.READ, ALLOW))
    assert decide(b, "bob", [(Op.READ, TOPIC, "any"), (Op.READ, TOPIC, "*x")]) == [False, True]


def test_literal_acl_does_not_match_longer_names() -> None:
    a = authorizer(acl(TOPIC, "foo", LITERAL, "User:bob", "*", Op.READ, ALLOW))
    assert decide(
        a, "bob", [(Op.READ, TOPIC, "foo"), (Op.READ, TOPIC, "foobar"), (Op.READ, TOPIC, "fo")]
    ) == [True, False, False]


def test_authorize_by_resource_type() -> None:
    a = many_acls()
    assert a.authorize_by_resource_type(BOB, LOCAL, Op.READ, TOPIC)
    assert not a.authorize_by_resource_type(BOB, LOCAL, Op.WRITE, TOPIC)
    assert a.authorize_by_resource_type(user("superman"), LOCAL, Op.WRITE, TOPIC)
    # a prefixed DENY covering the only ALLOW: nothing is left
    b = authorizer(
        acl(TOPIC, "foobar", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
        acl(TOPIC, "foo", PREFIXED, "User:bob", "*", Op.WRITE, DENY),
    )
    assert not b.authorize_by_resource_type(BOB, LOCAL, Op.WRITE, TOPIC)
    # a wildcard DENY denies outright; a wildcard ALLOW allows
    c = authorizer(
        acl(TOPIC, "x", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
        acl(TOPIC, "*", LITERAL, "User:*", "*", Op.WRITE, DENY),
    )
    assert not c.authorize_by_resource_type(BOB, LOCAL, Op.WRITE, TOPIC)
    d = authorizer(acl(TOPIC, "*", LITERAL, "User:*", "*", Op.ALL, ALLOW))
    assert d.authorize_by_resource_type(BOB, LOCAL, Op.WRITE, TOPIC)
    # no implied operations here: READ on some topic is no DESCRIBE on the type
    assert not many_acls().authorize_by_resource_type(BOB, LOCAL, Op.DESCRIBE, TOPIC)
    # with no ACL at all, the default decides (through the "hardcode" check)
    assert authorizer(allow_if_no_acl=True).authorize_by_resource_type(BOB, LOCAL, Op.WRITE, TOPIC)
    assert not authorizer().authorize_by_resource_type(BOB, LOCAL, Op.WRITE, TOPIC)
    with pytest.raises(ValueError, match="non-filter resource type"):
        a.authorize_by_resource_type(BOB, LOCAL, Op.WRITE, RT.ANY)


def test_a_decision_looks_up_only_the_prefix_lengths_bindings_have() -> None:
    # Every request asks (Metadata: once per topic), so a decision must not look up every
    # prefix of the name: a 249-character topic name among 1000 PREFIXED ACLs of 2-4
    # characters looks up its literal name, three prefixes and the wildcard (it was 249
    # prefixes, 850 us a decision). Counted, not timed: our speed is measured in bench/.
    acls = [acl(TOPIC, f"t{i}", PREFIXED, "User:bob", "*", Op.READ, ALLOW) for i in range(1000)]
    a = authorizer(*acls)
    long_name = "t5" + "x" * 247
    looked_up = list(a._applying(TOPIC, long_name))
    assert looked_up == [
        (TOPIC, LITERAL, long_name),
        (TOPIC, PREFIXED, "t5"),
        (TOPIC, PREFIXED, "t5x"),
        (TOPIC, PREFIXED, "t5xx"),
        (TOPIC, LITERAL, "*"),
    ]
    assert a.authorize(BOB, "0:0:0:0:0:0:0:1", Op.READ, TOPIC, long_name)


def reference_authorize(
    bindings: list[AclBinding],
    allow_if_no_acl: bool,
    who: KafkaPrincipal,
    op: AclOperation,
    rt: ResourceType,
    name: str,
) -> bool:
    """Kafka's decision spelled out: the bindings that apply are those a MATCH filter on the
    resource finds (its LITERAL name, LITERAL "*", PREFIXED prefixes); DENY wins."""
    match = ResourcePatternFilter(rt, name, PT.MATCH)
    results = [entry_result(op, who, LOCAL, b.entry) for b in bindings if match.matches(b.pattern)]
    if False in results:
        return False
    if True in results:
        return True
    return False if results else allow_if_no_acl


def test_decisions_agree_with_the_match_filter_reference() -> None:
    rnd = random.Random(7)
    names = ["*", "a", "ab", "abc", "abd", "b", "*a", "ba"]
    ops = [op for op in Op if op not in (Op.UNKNOWN, Op.ANY)]
    for _ in range(2000):
        bindings = [
            acl(
                rnd.choice([TOPIC, GROUP]),
                rnd.choice(names),
                rnd.choice([LITERAL, PREFIXED]),
                rnd.choice(["User:bob", "User:*", "User:alice", "Group:bob"]),
                rnd.choice(["*", LOCAL, "10.0.0.1"]),
                rnd.choice(ops),
                rnd.choice([ALLOW, DENY]),
            )
            for _ in range(rnd.randint(0, 6))
        ]
        allow_if_no_acl = rnd.random() < 0.5
        a = StandardAuthorizer((), allow_if_no_acl, bindings)
        for _ in range(10):
            who = KafkaPrincipal(rnd.choice(["User", "Group"]), rnd.choice(["bob", "alice"]))
            op, rt, name = rnd.choice(ops), rnd.choice([TOPIC, GROUP]), rnd.choice(["", *names])
            expected = reference_authorize(bindings, allow_if_no_acl, who, op, rt, name)
            assert a.authorize(who, LOCAL, op, rt, name) is expected, (bindings, who, op, rt, name)
