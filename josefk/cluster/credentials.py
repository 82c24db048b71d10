"""SCRAM credentials of a cluster's users in etcd: one key per user, followed by watch.

Owns ``CredentialRecords``, the etcd side of the cluster's credential store::

    P/scram_credentials/<user, percent-encoded>   the user's credentials (opaque bytes)

The value is whatever the broker's credential store encodes (salts, iteration counts,
StoredKeys and ServerKeys per mechanism: never a password); this module neither reads nor
checks it. A user is written whole by whichever broker (or ``josefk users add --etcd``)
changes it, with no compare-and-swap: two changes of one user at once end as the later one,
as two AlterUserScramCredentials would on one Kafka controller. Every broker follows the keys
by watch (``follow``), re-reading all of them after etcd comes back or compacted its history,
and checking them after half a minute without an event (a watch can go quiet without
breaking), so a user added through any broker logs in on every broker.

Imports the standard library, the etcd client (``aetcd``) and josefk.cluster.metadata_store
only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import quote, unquote

import aetcd.exceptions

from josefk.cluster.errors import MetadataStoreError
from josefk.cluster.metadata_store import EtcdMetadataStore, etcd_errors_translated

logger = logging.getLogger(__name__)

SEGMENT: Final = "scram_credentials"
_BACKOFF_START_S: Final = 0.1
_BACKOFF_MAX_S: Final = 2.0
# A watch silent this long has the keys read again to check it did not miss anything.
_CHECK_AFTER_S: Final = 30.0


class CredentialRecords:
    """The credential keys under one cluster prefix. Methods may run concurrently."""

    def __init__(self, store: EtcdMetadataStore) -> None:
        self._store = store

    def _key(self, user: str) -> bytes:
        # User names may hold "/" (Kafka allows any string): percent-encoded in the key.
        return self._store.key(SEGMENT, quote(user, safe=""))

    def _prefix(self) -> bytes:
        return self._store.key(SEGMENT, "")

    def _user_of(self, key: bytes) -> str:
        return unquote(key[len(self._prefix()) :].decode())

    @etcd_errors_translated
    async def load(self) -> tuple[int, dict[str, bytes]]:
        """Every user's record and the etcd revision they were read at."""
        result = await self._store.client.get_prefix(self._prefix())
        users = {self._user_of(kv.key): bytes(kv.value) for kv in result}
        return int(result.header.revision), users

    @etcd_errors_translated
    async def put(self, user: str, value: bytes) -> None:
        await self._store.client.put(self._key(user), value)

    @etcd_errors_translated
    async def delete(self, user: str) -> None:
        await self._store.client.delete(self._key(user))

    async def follow(
        self,
        revision: int,
        users: Mapping[str, bytes],
        on_change: Callable[[str, bytes | None], None],
        on_reload: Callable[[Mapping[str, bytes]], None],
        *,
        check_after_s: float = _CHECK_AFTER_S,
    ) -> None:
        """Report every change after ``revision``, at which the keys were ``users``
        (``on_change(user, value or None)``), until cancelled. When the watch breaks,
        everything is read again (``on_reload``) once etcd answers, and followed from there.

        A watch can also go quiet without breaking: an etcd client whose stream did not come
        back after etcd restarted. So after ``check_after_s`` without an event, the keys are
        read again and compared with what the watch reported; if they differ, the new
        content is reloaded and a new watch follows from it."""
        backoff = _BACKOFF_START_S
        seen = dict(users)  # the keys as the watch reported them
        while True:
            try:
                watch = await asyncio.wait_for(
                    self._store.client.watch_prefix(self._prefix(), start_revision=revision + 1),
                    self._store.timeout_s,
                )
                events = aiter(watch)
                pending: asyncio.Future[Any] = asyncio.ensure_future(anext(events))
                try:
                    while True:
                        done, _ = await asyncio.wait({pending}, timeout=check_after_s)
                        if not done:
                            revision, current = await self.load()
                            if current != seen:
                                logger.info("SCRAM credentials watch missed changes; reloading")
                                seen = current
                                on_reload(current)
                                break  # a new watch from the revision just read
                            continue
                        event = pending.result()  # StopAsyncIteration: the watch ended
                        pending = asyncio.ensure_future(anext(events))
                        backoff = _BACKOFF_START_S
                        kv = event.kv
                        revision = max(revision, int(kv.mod_revision))
                        user = self._user_of(kv.key)
                        if event.kind == "DELETE":
                            seen.pop(user, None)
                            on_change(user, None)
                        else:
                            seen[user] = bytes(kv.value)
                            on_change(user, seen[user])
                finally:
                    pending.cancel()
                    with contextlib.suppress(Exception):  # bounded, as the store's close
                        await asyncio.wait_for(watch.cancel(), self._store.timeout_s)
            except (
                aetcd.exceptions.ClientError,
                MetadataStoreError,
                OSError,
                TimeoutError,
                StopAsyncIteration,
            ) as exc:
                logger.info("SCRAM credentials watch interrupted (%r); reloading", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX_S)
                with contextlib.suppress(MetadataStoreError, OSError, TimeoutError):
                    revision, seen = await self.load()
                    on_reload(seen)
