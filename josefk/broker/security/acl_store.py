"""Where the ACL bindings live: a file in the first log dir on a single node, one etcd key
in a cluster.

Owns the ACL document (``encode`` / ``decode``: a version and the bindings, JSON) and the two
stores. Both change the set the same way: ``update(change)`` computes the new set from the
current one, makes it durable, then hands it to the ``Authorizer``, so the answer to
CreateAcls / DeleteAcls is sent only once the change would survive a crash.

- ``FileAclStore``: ``acls.json`` in the first log dir, rewritten whole with
  ``josefk.fileio.write_atomically`` (old file or new, never half), loaded at start-up.
- ``EtcdAclStore``: ``P/acls`` (``EtcdMetadataStore.read_acls`` / ``put_acls``), replaced by
  compare-and-swap and retried on a lost race; every broker's cluster watcher sees the key
  change and calls ``apply_document``, so an ACL made on one broker takes effect on all.
  Loaded from etcd before the listeners open; a document older (by etcd revision) than the
  one applied is never applied, so the watch cannot briefly undo this broker's own write.

Must not import josefk.broker.network, the handlers or josefk.storage.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from josefk.broker.security.authorizer import AclBinding, Authorizer
from josefk.fileio import write_atomically

if TYPE_CHECKING:
    from josefk.cluster.metadata_store import EtcdMetadataStore

logger = logging.getLogger(__name__)

FILE_NAME: Final = "acls.json"
_FORMAT_VERSION: Final = 1

# Given the current bindings, the new ones.
Change = Callable[[list[AclBinding]], list[AclBinding]]


def encode(bindings: list[AclBinding]) -> bytes:
    ordered = sorted(bindings, key=lambda b: json.dumps(b.encode()))
    entries = [binding.encode() for binding in ordered]
    return json.dumps({"version": _FORMAT_VERSION, "acls": entries}).encode() + b"\n"


def decode(data: bytes) -> list[AclBinding]:
    document = json.loads(data)
    if not isinstance(document, dict) or document.get("version") != _FORMAT_VERSION:
        raise ValueError(f"{FILE_NAME}: unknown format")
    return [AclBinding.decode(entry) for entry in document.get("acls", [])]


class AclStore(Protocol):
    authorizer: Authorizer

    async def update(self, change: Change) -> None: ...


class FileAclStore:
    def __init__(self, path: Path | None, authorizer: Authorizer) -> None:
        # path None: in memory only (unit tests).
        self.path = path
        self.authorizer = authorizer
        self._writes = asyncio.Lock()

    @staticmethod
    def read(log_dir: str | Path) -> list[AclBinding]:
        path = Path(log_dir) / FILE_NAME
        return decode(path.read_bytes()) if path.exists() else []

    async def update(self, change: Change) -> None:
        async with self._writes:
            bindings = change(self.authorizer.bindings())
            if self.path is not None:
                data = encode(bindings)
                await asyncio.get_running_loop().run_in_executor(
                    None, write_atomically, self.path, data
                )
            self.authorizer.replace(bindings)


class EtcdAclStore:
    """The cluster's ACLs. Three paths bring a document to the authorizer: ``load`` before the
    listeners open, ``update`` once this broker's own write is stored, and the watcher
    (``apply_document``). They race: the watch may deliver an older document after this
    broker applied its own newer write. Each document therefore comes with the etcd revision
    it is known current at (its modification revision, or the revision a snapshot was read
    at), and one older than the document applied is ignored, so the set in force only moves
    forward."""

    def __init__(self, store: EtcdMetadataStore, authorizer: Authorizer) -> None:
        self.store = store
        self.authorizer = authorizer
        # The etcd revision the applied document is current at (0: none applied yet).
        self.applied_revision = 0

    async def load(self) -> None:
        """Read ``P/acls`` and apply it: before the listeners open, so that a cluster broker
        never serves with an empty ACL set (only super users pass) until it has joined."""
        data, revision = await self.store.read_acls()
        self.apply_document(data, revision)

    async def update(self, change: Change) -> None:
        while True:
            data, revision = await self.store.read_acls()
            bindings = change(decode(data) if data is not None else [])
            written = await self.store.put_acls(encode(bindings), revision)
            if written is not None:
                # The watch brings the same set; applying it now lets the caller's next
                # request on this broker see it already.
                self._apply(bindings, written)
                return

    def apply_document(self, data: bytes | None, revision: int) -> None:
        """The watcher saw ``P/acls`` change (or read it at start-up): ``data`` is the
        document as of etcd revision ``revision``."""
        if revision < self.applied_revision:
            logger.debug(
                "ACLs of revision %d ignored: those of revision %d are applied",
                revision,
                self.applied_revision,
            )
            return
        try:
            bindings = decode(data) if data is not None else []
        except (ValueError, TypeError) as exc:
            logger.error("the ACLs in etcd cannot be read (%s); keeping the previous ones", exc)
            return
        self._apply(bindings, revision)

    def _apply(self, bindings: list[AclBinding], revision: int) -> None:
        if revision < self.applied_revision:
            return  # a newer document arrived while this write was on its way
        self.applied_revision = revision
        self.authorizer.replace(bindings)
