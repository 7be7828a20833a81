"""CreateAcls/DeleteAcls/DescribeAcls decisions (proxy/acl/admin.py) and filters
(proxy/acl/filters.py): Kafka's AclApis, AclControlManager and ResourcePatternFilter rules."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from proxy.acl import admin
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

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType


def acl(
    name: str = "t",
    ptype: PatternType = PT.LITERAL,
    rtype: ResourceType = RT.TOPIC,
    principal: str = "User:bob",
    op: AclOperation = Op.READ,
    perm: AclPermissionType = Perm.ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, ptype), AccessControlEntry(principal, host, op, perm)
    )


def pattern_filter(
    name: str | None, ptype: PatternType, rtype: ResourceType = RT.TOPIC
) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(rtype, name, ptype),
        AccessControlEntryFilter(None, None, Op.ANY, Perm.ANY),
    )


def test_unknown_codes_read_as_unknown_and_code_zero_is_unparseable() -> None:
    assert admin.from_code(RT, 99) is RT.UNKNOWN
    assert admin.from_code(Op, 15) is Op.TWO_PHASE_COMMIT
    assert admin.unparseable(2, 3, 0, 3) and not admin.unparseable(2, 3, 99, 3)


def test_create_validates_each_binding_in_kafkas_order() -> None:
    creations = [
        acl("orders"),
        acl("orders"),  # a duplicate: created once, both succeed
        acl("other", rtype=RT.CLUSTER),
        acl(""),
        acl("x", rtype=RT.UNKNOWN),
        acl("x", ptype=PT.UNKNOWN),
        acl("x", op=Op.UNKNOWN),
        acl("x", perm=Perm.UNKNOWN),
        acl("x", principal="bob"),
        acl("kafka-cluster", rtype=RT.CLUSTER, op=Op.ALTER),
    ]
    bindings, outcomes = admin.create([acl("old")], creations)
    assert bindings == (acl("old"), acl("orders"), creations[-1])
    assert [(o.code, o.message) for o in outcomes] == [
        (ErrorCode.none, None),
        (ErrorCode.none, None),
        (
            ErrorCode.invalid_request,
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (ErrorCode.invalid_request, "Invalid empty resource name"),
        (ErrorCode.invalid_request, "Invalid resourceType UNKNOWN"),
        (ErrorCode.invalid_request, "Invalid patternType UNKNOWN"),
        (ErrorCode.invalid_request, "Invalid operation UNKNOWN"),
        (ErrorCode.invalid_request, "Invalid permissionType UNKNOWN"),
        (
            ErrorCode.invalid_request,
            "Could not parse principal from `bob` (no colon is present separating the "
            "principal type from the principal name)",
        ),
        (ErrorCode.none, None),
    ]


def test_create_with_any_or_match_fails_the_whole_request() -> None:
    for bad in (
        acl(rtype=RT.ANY),
        acl(ptype=PT.MATCH),
        acl(ptype=PT.ANY),
        acl(op=Op.ANY),
        acl(perm=Perm.ANY),
    ):
        bindings, outcomes = admin.create([acl("old")], [acl("fine"), bad])
        assert bindings == (acl("old"),)
        assert [o.code for o in outcomes] == [ErrorCode.unknown_server_error] * 2


def test_delete_reports_what_each_filter_removed() -> None:
    a, b, c = acl("foo"), acl("foo", ptype=PT.PREFIXED), acl("bar", op=Op.WRITE)
    unknown_pattern = pattern_filter("foo", PT.UNKNOWN)
    unknown_entry = AclBindingFilter(
        ResourcePatternFilter(RT.ANY, None, PT.ANY),
        AccessControlEntryFilter(None, None, Op.UNKNOWN, Perm.ANY),
    )
    remaining, outcomes = admin.delete(
        [a, b, c],
        [
            pattern_filter("foo", PT.LITERAL),
            pattern_filter("foobar", PT.MATCH),
            unknown_pattern,
            unknown_entry,
        ],
    )
    assert remaining == (c,)
    assert [(o.code, o.message, o.matched) for o in outcomes] == [
        (ErrorCode.none, None, (a,)),
        (ErrorCode.none, None, (b,)),  # MATCH: the prefixed "foo" applies to "foobar"
        (ErrorCode.invalid_request, "Unknown patternFilter.", ()),
        (ErrorCode.invalid_request, "Unknown entryFilter.", ()),
    ]
    # every filter sees the bindings as they were: one binding may be reported twice
    _, twice = admin.delete([a], [ANY_BINDING, ANY_BINDING])
    assert [o.matched for o in twice] == [(a,), (a,)]


def test_filters_match_as_kafkas() -> None:
    lit, pre, star = acl("foo"), acl("fo", ptype=PT.PREFIXED), acl("*")
    group = acl("foo", rtype=RT.GROUP)
    every = [lit, pre, star, group]

    def matched(f: AclBindingFilter) -> list[AclBinding]:
        return [x for x in every if f.matches(x)]

    assert matched(pattern_filter(None, PT.ANY)) == [lit, pre, star]
    assert matched(pattern_filter(None, PT.ANY, RT.ANY)) == every
    assert matched(pattern_filter("foo", PT.ANY)) == [lit]
    assert matched(pattern_filter("fo", PT.PREFIXED)) == [pre]
    assert matched(pattern_filter("fo", PT.LITERAL)) == []
    assert matched(pattern_filter("foo", PT.MATCH)) == [lit, pre, star]
    assert matched(pattern_filter("f", PT.MATCH)) == [star]
    assert matched(pattern_filter("*", PT.LITERAL)) == [star]
    assert matched(pattern_filter(None, PT.UNKNOWN)) == []
    entry = AclBindingFilter(
        ResourcePatternFilter(RT.ANY, None, PT.ANY),
        AccessControlEntryFilter("User:bob", "*", Op.READ, Perm.ALLOW),
    )
    assert matched(entry) == every
    other_host = AclBindingFilter(
        entry.pattern, AccessControlEntryFilter(None, "10.0.0.1", Op.ANY, Perm.ANY)
    )
    assert matched(other_host) == []


def test_describe_groups_by_resource_pattern() -> None:
    a, b, c = acl("foo"), acl("foo", op=Op.WRITE), acl("bar")
    assert admin.describe([a, c, b], ANY_BINDING) == [
        (a.pattern, [a.entry, b.entry]),
        (c.pattern, [c.entry]),
    ]
    assert admin.describe([a, c, b], pattern_filter("bar", PT.MATCH)) == [(c.pattern, [c.entry])]
