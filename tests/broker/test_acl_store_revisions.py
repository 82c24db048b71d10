"""The cluster's ACL store (``EtcdAclStore``) applies ACL documents only forward in etcd
revision: the watch may deliver an older document after this broker applied its own newer
write, and that must not undo it, even briefly. Also: ``load`` puts etcd's ACLs in force
(before the listeners open), so a cluster broker never serves with an empty set."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from josefk.broker.security.acl_store import EtcdAclStore, encode
from josefk.broker.security.authorizer import AclBinding, Authorizer
from josefk.protocol.acls import AclOperation, AclPermissionType, PatternType, ResourceType


def acl(topic: str) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        topic,
        PatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )


class FakeEtcd:
    """``P/acls`` with etcd's revision counter and compare-and-swap on its mod revision."""

    def __init__(self) -> None:
        self.revision = 1
        self.data: bytes | None = None
        self.mod_revision = 0

    def write(self, data: bytes | None) -> int:
        self.revision += 1
        self.data, self.mod_revision = data, self.revision
        return self.revision

    async def read_acls(self) -> tuple[bytes | None, int]:
        return self.data, self.mod_revision

    async def put_acls(self, data: bytes, expected_mod_revision: int) -> int | None:
        if expected_mod_revision != self.mod_revision:
            return None
        return self.write(data)


def store_on(etcd: FakeEtcd) -> EtcdAclStore:
    return EtcdAclStore(cast(Any, etcd), Authorizer())


def test_load_puts_the_stored_acls_in_force() -> None:
    etcd = FakeEtcd()
    etcd.write(encode([acl("orders")]))
    store = store_on(etcd)
    asyncio.run(store.load())
    assert store.authorizer.bindings() == [acl("orders")]


def test_an_older_watch_event_does_not_undo_this_brokers_own_write() -> None:
    etcd = FakeEtcd()
    store = store_on(etcd)
    older = etcd.write(encode([acl("first")]))  # another broker's change, not yet watched
    asyncio.run(store.update(lambda bindings: [*bindings, acl("second")]))
    assert store.authorizer.bindings() == [acl("first"), acl("second")]
    own = etcd.mod_revision

    store.apply_document(encode([acl("first")]), older)  # the watch catches up late
    assert store.authorizer.bindings() == [acl("first"), acl("second")]
    store.apply_document(etcd.data, own)  # the write's own event: the same set
    assert store.authorizer.bindings() == [acl("first"), acl("second")]

    newer = etcd.write(None)  # deleted elsewhere afterwards: that applies
    store.apply_document(None, newer)
    assert store.authorizer.bindings() == []
    assert store.applied_revision == newer


def test_an_unreadable_document_keeps_the_previous_set() -> None:
    etcd = FakeEtcd()
    store = store_on(etcd)
    store.apply_document(encode([acl("kept")]), 5)
    store.apply_document(b"{not json", 6)
    assert store.authorizer.bindings() == [acl("kept")]


@given(st.permutations(range(6)))
def test_in_any_delivery_order_the_newest_document_seen_is_in_force(order: list[int]) -> None:
    documents = {revision: [acl(f"t{revision}")] for revision in range(6)}
    store = store_on(FakeEtcd())
    newest = -1
    for revision in order:
        store.apply_document(encode(documents[revision]), revision)
        newest = max(newest, revision)
        assert store.authorizer.bindings() == documents[newest]
        assert store.applied_revision == newest
