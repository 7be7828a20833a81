"""The delegation-token rules (proxy/delegation/tokens.py) under a fake clock: Kafka's
DelegationTokenControlManager and DelegationTokenManager.filterToken."""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import replace

from kio.schema.errors import ErrorCode

from proxy.delegation.tokens import (
    Token,
    TokenSettings,
    create,
    describe,
    expire,
    renew,
    sweep,
    token_hmac,
)
from proxy.principal import KafkaPrincipal

ON = TokenSettings(secret_key="s3cret", max_lifetime_ms=1000, expiry_time_ms=100)
OFF = TokenSettings(secret_key="")
ALICE, BOB, CAROL = (KafkaPrincipal("User", n) for n in ("alice", "bob", "carol"))
T0 = 10_000


def _new(owner: KafkaPrincipal = ALICE, requester: KafkaPrincipal = ALICE, max: int = -1) -> Token:
    out = create(ON, requester, owner, [BOB], max, T0, lambda: "t1")
    assert out.code == ErrorCode.none and out.token is not None
    return out.token


def test_create_sets_the_lifetimes_from_the_configs_and_the_request() -> None:
    t = _new()
    assert (t.issue_ms, t.expiry_ms, t.max_ms) == (T0, T0 + 100, T0 + 1000)
    assert _new(max=50).max_ms == T0 + 50 and _new(max=50).expiry_ms == T0 + 50
    assert _new(max=5000).max_ms == T0 + 1000  # the config caps the request
    assert _new(max=0).max_ms == T0 + 1000  # 0 or less: the config's


def test_create_is_refused_while_off_and_for_a_non_user_renewer() -> None:
    off = create(OFF, ALICE, ALICE, [], -1, T0, lambda: "t")
    assert (off.code, off.token) == (ErrorCode.delegation_token_auth_disabled, None)
    group = KafkaPrincipal("Group", "g")
    bad = create(ON, ALICE, ALICE, [group], -1, T0, lambda: "t")
    assert bad.code == ErrorCode.invalid_principal_type


def test_the_hmac_is_hmac_sha512_of_the_id_under_the_secret_key() -> None:
    want = hmac.new(b"s3cret", b"t1", hashlib.sha512).digest()
    assert token_hmac("t1", "s3cret") == want
    assert len(base64.b64encode(want)) == 88


def test_renew_by_owner_or_renewer_within_max() -> None:
    t = _new()
    r = renew(ON, t, BOB, -1, T0 + 50)
    assert (r.code, r.expiry_ms) == (ErrorCode.none, T0 + 150)
    assert r.token is not None and r.token.expiry_ms == T0 + 150
    assert renew(ON, t, ALICE, 30, T0 + 50).expiry_ms == T0 + 80  # a shorter period asked
    assert renew(ON, t, ALICE, 999, T0 + 50).expiry_ms == T0 + 150  # capped by the config
    renewed = replace(t, expiry_ms=T0 + 990)  # renewed on and on
    assert renew(ON, renewed, ALICE, -1, T0 + 950).expiry_ms == T0 + 1000  # capped by max
    mismatch = renew(ON, t, CAROL, -1, T0 + 50)
    assert (mismatch.code, mismatch.expiry_ms, mismatch.token) == (
        ErrorCode.delegation_token_owner_mismatch,
        0,
        None,
    )


def test_renew_errors_in_kafkas_order() -> None:
    t = _new()
    assert renew(OFF, t, ALICE, -1, T0).code == ErrorCode.delegation_token_auth_disabled
    assert renew(ON, None, ALICE, -1, T0).code == ErrorCode.delegation_token_not_found
    # expired is checked before the owner
    assert renew(ON, t, CAROL, -1, T0 + 101).code == ErrorCode.delegation_token_expired
    assert renew(ON, t, ALICE, -1, T0 + 100).code == ErrorCode.none  # at expiry: not yet


def test_expire_now_removes_and_a_period_moves_the_expiry() -> None:
    t = _new()
    now = expire(ON, t, ALICE, -1, T0 + 10)
    assert (now.code, now.expiry_ms, now.removed) == (ErrorCode.none, T0 + 10, "t1")
    later = expire(ON, t, BOB, 500, T0 + 10)  # may lengthen it, up to max (as Kafka)
    assert later.token is not None and later.expiry_ms == later.token.expiry_ms == T0 + 510
    assert expire(ON, t, BOB, 5000, T0 + 10).expiry_ms == T0 + 1000
    assert expire(ON, t, CAROL, -1, T0).code == ErrorCode.delegation_token_owner_mismatch
    assert expire(ON, None, ALICE, -1, T0).code == ErrorCode.delegation_token_not_found
    # an expired token can still be expired at once, not otherwise
    assert expire(ON, t, ALICE, -1, T0 + 500).code == ErrorCode.none
    assert expire(ON, t, ALICE, 10, T0 + 500).code == ErrorCode.delegation_token_expired


def test_the_sweep_removes_tokens_past_expiry_or_max() -> None:
    t = _new()
    assert sweep([t], T0 + 100) == []
    assert sweep([t], T0 + 101) == ["t1"]


def test_describe_by_owner_renewer_requester_and_acls() -> None:
    mine = _new()  # alice's, bob renews
    theirs = _new(owner=CAROL, requester=BOB)  # bob made it for carol (KIP-373)
    tokens = [mine, theirs]

    def no(_: object) -> bool:
        return False

    ids = [id(t) for t in describe(tokens, ALICE, None, no, no)]
    assert ids == [id(mine)]
    assert describe(tokens, BOB, None, no, no) == tokens  # renewer of one, requester of other
    assert describe(tokens, CAROL, [ALICE], no, no) == []  # not hers, no ACL
    assert describe(tokens, CAROL, [ALICE], lambda i: True, no) == [mine]
    assert describe(tokens, CAROL, None, no, lambda o: o == ALICE) == tokens  # own + ALICE's
    assert describe(tokens, BOB, [], no, no) == []  # an empty owner list: none
    assert describe(tokens, BOB, [CAROL], no, no) == [theirs]
