"""The authorizer's rules (josefk.broker.security.authorizer) and the ACL document."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.broker.security.acl_store import decode, encode
from josefk.broker.security.authorizer import (
    AclBinding,
    AclBindingFilter,
    Authorizer,
    InvalidAcl,
)
from josefk.protocol.acls import (
    AclOperation as Op,
)
from josefk.protocol.acls import (
    AclPermissionType as Perm,
)
from josefk.protocol.acls import (
    PatternType as Pat,
)
from josefk.protocol.acls import (
    ResourceType as Res,
)
from josefk.protocol.acls import parse_code

ALICE, BOB = "User:alice", "User:bob"
HOST = "127.0.0.1"


def acl(
    name: str = "orders",
    *,
    rtype: Res = Res.TOPIC,
    pattern: Pat = Pat.LITERAL,
    principal: str = ALICE,
    host: str = "*",
    op: Op = Op.READ,
    perm: Perm = Perm.ALLOW,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def can(auth: Authorizer, principal: str, op: Op, name: str, rtype: Res = Res.TOPIC) -> bool:
    return auth.authorize(principal, HOST, op, rtype, name)


def test_no_acl_denies_by_default_and_allows_with_allow_everyone() -> None:
    assert not can(Authorizer(), ALICE, Op.READ, "orders")
    assert can(Authorizer(allow_everyone_if_no_acl_found=True), ALICE, Op.READ, "orders")


def test_an_acl_for_anyone_else_on_the_resource_makes_allow_everyone_not_apply() -> None:
    auth = Authorizer(allow_everyone_if_no_acl_found=True, bindings=[acl(principal=BOB)])
    assert not can(auth, ALICE, Op.READ, "orders")
    assert can(auth, ALICE, Op.READ, "payments")


def test_super_users_pass_even_a_deny() -> None:
    auth = Authorizer(super_users=[ALICE], bindings=[acl(op=Op.ALL, perm=Perm.DENY)])
    assert can(auth, ALICE, Op.DELETE, "orders")
    assert can(auth, ALICE, Op.CLUSTER_ACTION, "kafka-cluster", Res.CLUSTER)


def test_deny_wins_over_allow() -> None:
    auth = Authorizer(bindings=[acl(op=Op.ALL), acl(op=Op.WRITE, perm=Perm.DENY)])
    assert can(auth, ALICE, Op.READ, "orders")
    assert not can(auth, ALICE, Op.WRITE, "orders")


def test_implied_operations() -> None:
    for granting in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        auth = Authorizer(bindings=[acl(op=granting)])
        assert can(auth, ALICE, Op.DESCRIBE, "orders"), granting
        assert not can(auth, ALICE, Op.DESCRIBE_CONFIGS, "orders"), granting
    auth = Authorizer(bindings=[acl(op=Op.ALTER_CONFIGS)])
    assert can(auth, ALICE, Op.DESCRIBE_CONFIGS, "orders")
    assert not can(auth, ALICE, Op.DESCRIBE, "orders")
    # DESCRIBE does not imply READ, and a DENY of READ does not deny DESCRIBE.
    auth = Authorizer(bindings=[acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=Perm.DENY)])
    assert can(auth, ALICE, Op.DESCRIBE, "orders")
    assert not can(auth, ALICE, Op.READ, "orders")


def test_all_allows_every_operation() -> None:
    auth = Authorizer(bindings=[acl(op=Op.ALL)])
    for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.ALTER_CONFIGS):
        assert can(auth, ALICE, op, "orders")


def test_wildcard_and_prefixed_resources() -> None:
    auth = Authorizer(
        bindings=[
            acl("*", op=Op.DESCRIBE),
            acl("pay", pattern=Pat.PREFIXED, op=Op.WRITE),
            acl("payments-secret", op=Op.WRITE, perm=Perm.DENY),
        ]
    )
    assert can(auth, ALICE, Op.DESCRIBE, "anything")
    assert can(auth, ALICE, Op.WRITE, "payments")
    assert can(auth, ALICE, Op.WRITE, "pay")
    assert not can(auth, ALICE, Op.WRITE, "pa")
    assert not can(auth, ALICE, Op.WRITE, "payments-secret")
    assert not can(auth, ALICE, Op.WRITE, "orders")
    # A literal "pay*" is not a pattern.
    auth = Authorizer(bindings=[acl("pay*", op=Op.WRITE)])
    assert not can(auth, ALICE, Op.WRITE, "payments")


def test_principal_and_host_matching() -> None:
    auth = Authorizer(
        bindings=[
            acl(principal="User:*", op=Op.READ),
            acl(principal=BOB, host="10.0.0.1", op=Op.READ, perm=Perm.DENY),
            acl(principal=ALICE, host="10.0.0.2", op=Op.WRITE),
        ]
    )
    assert auth.authorize(BOB, "127.0.0.1", Op.READ, Res.TOPIC, "orders")
    assert not auth.authorize(BOB, "10.0.0.1", Op.READ, Res.TOPIC, "orders")
    assert auth.authorize(ALICE, "10.0.0.2", Op.WRITE, Res.TOPIC, "orders")
    assert not auth.authorize(ALICE, "10.0.0.3", Op.WRITE, Res.TOPIC, "orders")


def test_resource_types_are_separate() -> None:
    auth = Authorizer(bindings=[acl("orders", rtype=Res.GROUP, op=Op.READ)])
    assert can(auth, ALICE, Op.READ, "orders", Res.GROUP)
    assert not can(auth, ALICE, Op.READ, "orders", Res.TOPIC)


def test_decisions_follow_changes_of_the_acls() -> None:
    auth = Authorizer()
    assert not can(auth, ALICE, Op.READ, "orders")
    auth.add([acl()])
    assert can(auth, ALICE, Op.READ, "orders")
    auth.remove([acl()])
    assert not can(auth, ALICE, Op.READ, "orders")


def test_authorized_operations_bitfield() -> None:
    auth = Authorizer(bindings=[acl(op=Op.WRITE), acl(op=Op.ALTER_CONFIGS)])
    bits = auth.authorized_operations(ALICE, HOST, Res.TOPIC, "orders")
    expected = {Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}
    assert bits == sum(1 << op for op in expected)


def test_validation_of_new_bindings() -> None:
    good = (int(Res.TOPIC), "t", int(Pat.LITERAL), ALICE, "*", int(Op.READ), int(Perm.ALLOW))
    assert AclBinding.of(*good).resource_name == "t"
    bad = [
        (int(Res.ANY), *good[1:]),
        (good[0], "", *good[2:]),
        (*good[:2], int(Pat.MATCH), *good[3:]),
        (*good[:3], "alice", *good[4:]),
        (*good[:5], int(Op.ANY), good[6]),
        (*good[:6], int(Perm.ANY)),
        (*good[:6], 99),
        (int(Res.CLUSTER), "other", *good[2:]),
    ]
    for args in bad:
        with pytest.raises(InvalidAcl):
            AclBinding.of(*args)  # type: ignore[arg-type]


def test_filters_any_match_literal_prefixed() -> None:
    literal, prefixed, wildcard = acl("payments"), acl("pay", pattern=Pat.PREFIXED), acl("*")
    group = acl("payments", rtype=Res.GROUP)
    every = [literal, prefixed, wildcard, group]

    def found(name: str | None, pattern: Pat, rtype: Res = Res.ANY) -> list[AclBinding]:
        f = AclBindingFilter(rtype, name, pattern, None, None, Op.ANY, Perm.ANY)
        return [b for b in every if f.matches(b)]

    assert found(None, Pat.ANY) == every
    assert found("payments", Pat.ANY) == [literal, group]
    assert found("payments", Pat.MATCH, Res.TOPIC) == [literal, prefixed, wildcard]
    assert found("pay", Pat.LITERAL) == []
    assert found("pay", Pat.PREFIXED) == [prefixed]
    assert found(None, Pat.LITERAL, Res.TOPIC) == [literal, wildcard]
    with pytest.raises(InvalidAcl):
        AclBindingFilter.of(0, None, int(Pat.ANY), None, None, int(Op.ANY), int(Perm.ANY))


def test_document_round_trip() -> None:
    bindings = [acl(), acl("x", pattern=Pat.PREFIXED, op=Op.ALL, perm=Perm.DENY)]
    assert sorted(decode(encode(bindings)), key=repr) == sorted(bindings, key=repr)


def test_parse_code_names() -> None:
    assert parse_code(Op, "describe-configs") is Op.DESCRIBE_CONFIGS
    assert parse_code(Op, "DescribeConfigs") is Op.DESCRIBE_CONFIGS
    assert parse_code(Pat, "prefixed") is Pat.PREFIXED
    with pytest.raises(ValueError, match="unknown AclOperation"):
        parse_code(Op, "fly")


def test_any_allowed_on_type() -> None:
    assert not Authorizer().any_allowed_on_type(ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert Authorizer(allow_everyone_if_no_acl_found=True).any_allowed_on_type(
        ALICE, HOST, Op.WRITE, Res.TOPIC
    )
    auth = Authorizer(
        bindings=[
            acl("pay", pattern=Pat.PREFIXED, op=Op.WRITE),
            acl("pay", op=Op.WRITE, perm=Perm.DENY),
        ]
    )
    assert auth.any_allowed_on_type(ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert not auth.any_allowed_on_type(BOB, HOST, Op.WRITE, Res.TOPIC)
    auth = Authorizer(bindings=[acl("*", op=Op.WRITE, perm=Perm.DENY), acl("x", op=Op.WRITE)])
    assert not auth.any_allowed_on_type(ALICE, HOST, Op.WRITE, Res.TOPIC)


_names = st.text(alphabet="abt*-.0", min_size=1, max_size=6)
bindings = st.builds(
    AclBinding,
    st.sampled_from([Res.TOPIC, Res.GROUP, Res.TRANSACTIONAL_ID]),
    _names,
    st.sampled_from([Pat.LITERAL, Pat.PREFIXED]),
    st.sampled_from([ALICE, BOB, "User:*"]),
    st.sampled_from(["*", HOST, "10.0.0.1"]),
    st.sampled_from([op for op in Op if op not in (Op.UNKNOWN, Op.ANY)]),
    st.sampled_from([Perm.ALLOW, Perm.DENY]),
)


@given(st.lists(bindings, max_size=8))
def test_document_round_trips_any_binding_set(found: list[AclBinding]) -> None:
    assert set(decode(encode(found))) == set(found)


@given(bindings, st.lists(bindings, max_size=6))
def test_an_exact_filter_matches_its_binding_only(
    binding: AclBinding, others: list[AclBinding]
) -> None:
    exact = AclBindingFilter(
        binding.resource_type,
        binding.resource_name,
        binding.pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission,
    )
    anything = AclBindingFilter(Res.ANY, None, Pat.ANY, None, None, Op.ANY, Perm.ANY)
    assert exact.matches(binding) and anything.matches(binding)
    assert all(exact.matches(b) == (b == binding) for b in others)


@given(st.lists(bindings, max_size=8), st.sampled_from([ALICE, BOB]), _names)
def test_a_deny_for_all_always_refuses(found: list[AclBinding], principal: str, name: str) -> None:
    deny = AclBinding(Res.TOPIC, name, Pat.LITERAL, principal, "*", Op.ALL, Perm.DENY)
    auth = Authorizer(bindings=[*found, deny])
    assert not any(auth.authorize(principal, HOST, op, Res.TOPIC, name) for op in Op)
