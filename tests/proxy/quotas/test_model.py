"""Client quota decisions as Kafka's ClientQuotaControlManager and ClientQuotasImage take them.
The map orders were checked against a JVM (``java.util.HashMap``, Java 21)."""

from __future__ import annotations

import math

from kio.schema.errors import ErrorCode

from proxy.quotas import javamap
from proxy.quotas.model import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    Alteration,
    Component,
    Op,
    QuotaError,
    alter,
    describe,
)

E = ErrorCode
ALICE = (("user", "alice"),)
ALICE_C1 = (("client-id", "c1"), ("user", "alice"))


def one(entity: list[tuple[str, str | None]], *ops: Op) -> Alteration:
    return Alteration(entity, list(ops))


def result(entity: list[tuple[str, str | None]], *ops: Op) -> tuple[ErrorCode, str | None]:
    _, (r,) = alter({}, [one(entity, *ops)])
    return r.code, r.message


def test_java_hashmap_orders_match_the_jvm() -> None:
    assert javamap.string_map_order(["user", "client-id", "ip"], 3) == ["client-id", "user", "ip"]
    keys = ["foo", "bar", "producer_byte_rate", "consumer_byte_rate", "request_percentage"]
    assert javamap.string_map_order(keys, 5) == [
        "bar",
        "producer_byte_rate",
        "consumer_byte_rate",
        "foo",
        "request_percentage",
    ]
    assert javamap.string_map_order(list("xyzwvutsrqponm"), 14) == list("mnopqrstuvwxyz")
    maps = []
    for u in ["alice", "bob", "carol", None, "dave"]:
        maps += [(("user", u),), (("client-id", "c"), ("user", u))]
    got = javamap.order(maps, [javamap.map_hash(dict(m)) for m in maps], 16)
    assert [dict(m).get("user") for m in got][:4] == [None, "alice", "bob", "alice"]


def test_set_then_remove() -> None:
    after, (r,) = alter({}, [one([("user", "alice")], Op("producer_byte_rate", 1024.0))])
    assert (r.entity, r.code, r.message) == (ALICE, E.none, None)
    assert after == {ALICE: {"producer_byte_rate": 1024.0}}
    after, _ = alter(after, [one([("user", "alice")], Op("producer_byte_rate", None))])
    assert after == {}


def test_removing_an_unknown_or_unset_key_is_a_no_op() -> None:
    assert result([("user", "alice")], Op("nonsense", None)) == (E.none, None)


def test_entity_errors() -> None:
    bad = E.invalid_request
    assert result([]) == (bad, "Invalid empty client quota entity")
    assert result([("group", "g")]) == (bad, "Unhandled client quota entity type: group")
    assert result([("user", "")]) == (bad, "Empty user not supported")
    assert result([("ip", "1.2.3.4"), ("user", "a")], Op("producer_byte_rate", 1.0)) == (
        bad,
        "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
    )
    _, (r,) = alter({}, [one([("ip", "nohost")], Op("connection_creation_rate", 1.0))], {"nohost"})
    assert (r.code, r.message) == (bad, "nohost is not a valid IP or resolvable host.")


def test_keys_and_values() -> None:
    bad = E.invalid_request
    user = [("user", "a")]
    assert result(user, Op("connection_creation_rate", 1.0)) == (
        bad,
        "Invalid configuration key connection_creation_rate",
    )
    assert result([("ip", None)], Op("producer_byte_rate", 1.0)) == (
        bad,
        "Invalid configuration key producer_byte_rate",
    )
    assert result(user, Op("consumer_byte_rate", 0.0)) == (
        bad,
        "Quota consumer_byte_rate must be greater than 0",
    )
    assert result(user, Op("producer_byte_rate", 1.5)) == (
        bad,
        "producer_byte_rate cannot be a fractional value.",
    )
    assert result(user, Op("producer_byte_rate", 1e19)) == (
        bad,
        "Proposed value for producer_byte_rate is too large for a LONG.",
    )
    assert result([("ip", "10.0.0.1")], Op("connection_creation_rate", 3e9)) == (
        bad,
        "Proposed value for connection_creation_rate is too large for an INT.",
    )
    assert result(user, Op("request_percentage", 12.5)) == (E.none, None)
    assert result(user, Op("controller_mutation_rate", math.inf)) == (E.none, None)
    # two bad keys: the first in Kafka's HashMap order is reported
    assert result(user, Op("foo", 1.0), Op("bar", 1.0)) == (bad, "Invalid configuration key bar")


def test_one_bad_value_leaves_the_entity_unchanged_but_others_apply() -> None:
    after, results = alter(
        {},
        [
            one([("user", "a")], Op("producer_byte_rate", 10.0), Op("consumer_byte_rate", -1.0)),
            one([("user", "b")], Op("producer_byte_rate", 10.0)),
        ],
    )
    assert after == {(("user", "b"),): {"producer_byte_rate": 10.0}}
    assert {r.entity: r.code for r in results} == {
        (("user", "a"),): E.invalid_request,
        (("user", "b"),): E.none,
    }


def test_duplicates() -> None:
    # a duplicate key: Kafka's "Duplicate quota key" is overwritten by "Ignoring duplicate entity"
    entity = [("user", "alice"), ("client-id", "c1")]
    after, (r,) = alter(
        {}, [one(entity, Op("producer_byte_rate", 1.0), Op("producer_byte_rate", 2.0))]
    )
    assert (r.entity, r.code, r.message) == (
        ALICE_C1,
        E.invalid_request,
        "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=c1, user=alice})",
    )
    assert after == {}
    # the same entity twice: the first one's change is made, its result is the second's error
    after, (r,) = alter(
        {},
        [
            one(entity, Op("producer_byte_rate", 1.0)),
            one(entity[::-1], Op("consumer_byte_rate", 2.0)),
        ],
    )
    assert r.code == E.invalid_request
    assert after == {ALICE_C1: {"producer_byte_rate": 1.0}}
    # a type named twice in one entity: the last name wins
    after, (r,) = alter(
        {}, [one([("user", "x"), ("user", "alice")], Op("producer_byte_rate", 1.0))]
    )
    assert (r.entity, r.code) == (ALICE, E.none)


QUOTAS = {
    (("user", "alice"),): {"producer_byte_rate": 1.0},
    (("user", None),): {"producer_byte_rate": 2.0},
    (("client-id", "c1"), ("user", "alice")): {"consumer_byte_rate": 3.0},
    (("client-id", None),): {"request_percentage": 4.0},
    (("ip", "10.0.0.1"),): {"connection_creation_rate": 5.0},
}


def names(components: list[Component], strict: bool) -> set[tuple[tuple[str, str | None], ...]]:
    return {tuple(sorted(e)) for e, _ in describe(QUOTAS, components, strict)}


def test_describe_matching() -> None:
    user_exact = Component("user", MATCH_EXACT, "alice")
    assert names([user_exact], strict=False) == {
        (("user", "alice"),),
        (("client-id", "c1"), ("user", "alice")),
    }
    assert names([user_exact], strict=True) == {(("user", "alice"),)}
    assert names([Component("user", MATCH_DEFAULT, None)], strict=False) == {(("user", None),)}
    assert names([Component("user", MATCH_SPECIFIED, None)], strict=True) == {
        (("user", "alice"),),
        (("user", None),),
    }
    assert names(
        [Component("user", MATCH_SPECIFIED, None), Component("client-id", MATCH_SPECIFIED, None)],
        strict=False,
    ) == {(("client-id", "c1"), ("user", "alice"))}
    assert len(names([], strict=False)) == 5
    assert names([], strict=True) == set()
    assert names([Component("ip", MATCH_SPECIFIED, None)], strict=False) == {(("ip", "10.0.0.1"),)}


def test_describe_filter_errors() -> None:
    cases = [
        ([Component("", MATCH_EXACT, "a")], E.invalid_request, "Invalid empty entity type."),
        (
            [Component("user", MATCH_EXACT, "a"), Component("user", MATCH_SPECIFIED, None)],
            E.invalid_request,
            "Entity type user cannot appear more than once in the filter.",
        ),
        (
            [Component("group", MATCH_EXACT, "a")],
            E.unsupported_version,
            "Unsupported entity type group",
        ),
        (
            [Component("user", MATCH_EXACT, None)],
            E.invalid_request,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        (
            [Component("user", MATCH_DEFAULT, "a")],
            E.invalid_request,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        ),
        (
            [Component("user", MATCH_SPECIFIED, "a")],
            E.invalid_request,
            "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
        ),
        ([Component("user", 7, None)], E.invalid_request, "Unknown match type 7"),
        (
            [Component("ip", MATCH_DEFAULT, None), Component("client-id", MATCH_SPECIFIED, None)],
            E.invalid_request,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        ),
    ]
    for components, code, message in cases:
        try:
            describe(QUOTAS, components, strict=False)
        except QuotaError as exc:
            assert (exc.code, exc.message) == (code, message)
        else:
            raise AssertionError(components)


def test_describe_lists_an_entity_as_kafka_orders_its_types() -> None:
    (found,) = describe(QUOTAS, [Component("client-id", MATCH_EXACT, "c1")], strict=False)
    assert found == (ALICE_C1, [("consumer_byte_rate", 3.0)])
