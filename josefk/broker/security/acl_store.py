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
    def __init__(self, store: EtcdMetadataStore, authorizer: Authorizer) -> None:
        self.store = store
        self.authorizer = authorizer

    async def update(self, change: Change) -> None:
        while True:
            data, revision = await self.store.read_acls()
            bindings = change(decode(data) if data is not None else [])
            if await self.store.put_acls(encode(bindings), revision):
                # The watch brings the same set; applying it now lets the caller's next
                # request on this broker see it already.
                self.authorizer.replace(bindings)
                return

    def apply_document(self, data: bytes | None) -> None:
        """The watcher saw ``P/acls`` change (or read it at start-up)."""
        try:
            bindings = decode(data) if data is not None else []
        except (ValueError, TypeError) as exc:
            logger.error("the ACLs in etcd cannot be read (%s); keeping the previous ones", exc)
            return
        self.authorizer.replace(bindings)
