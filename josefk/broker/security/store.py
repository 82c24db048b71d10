"""Where SCRAM credentials are kept: a file on a single node, etcd on a cluster.

Owns ``CredentialStore``, the interface the SASL code and the SCRAM user handlers use: users'
credentials by mechanism held in memory (``get``, ``any_credential``, ``users``; changed with
``upsert`` / ``delete``, synchronously, then made durable by ``await persist()``), and its two
implementations:

- ``FileCredentialStore`` (single node): ``scram-credentials.json`` in the first log dir,
  loaded at start-up and rewritten whole and atomically on every change
  (``josefk.fileio.write_atomically``), so a crash leaves the old file or the new one.
  ``CredentialStore.load(log_dir)`` opens it.
- ``EtcdCredentialStore`` (cluster, ``josefk.etcd.endpoints`` set): one etcd key per user
  (``josefk.cluster.credentials``), read at start-up and followed by watch, so a user added
  through any broker logs in on every broker; ``persist`` writes the users changed since.

Only salts, iteration counts, StoredKeys and ServerKeys are kept, never a password. Must not
import josefk.broker.network or the handlers.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from josefk.broker.security.scram import ScramCredential
from josefk.fileio import write_atomically

if TYPE_CHECKING:
    from josefk.cluster.credentials import CredentialRecords


logger = logging.getLogger(__name__)

FILE_NAME: Final = "scram-credentials.json"
_FORMAT_VERSION: Final = 1
# How long ``EtcdCredentialStore.close`` waits for its watch to stop.
_CLOSE_TIMEOUT_S: Final = 5.0

Users = dict[str, dict[str, ScramCredential]]


class CredentialStore:
    """Users' SCRAM credentials in memory; subclasses make changes durable (``persist``).

    Every method runs on the event loop; the in-memory state changes without awaiting, so a
    lookup never sees half a change.
    """

    def __init__(self, users: Users | None = None) -> None:
        self._users: Users = users if users is not None else {}

    @classmethod
    def load(cls, log_dir: str | Path) -> FileCredentialStore:
        """The single node's store: the credential file in ``log_dir``."""
        return FileCredentialStore.load(log_dir)

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def any_credential(self, user: str) -> ScramCredential | None:
        """The strongest credential of ``user``: what PLAIN checks a password against."""
        credentials = self._users.get(user, {})
        return credentials.get("SCRAM-SHA-512") or credentials.get("SCRAM-SHA-256")

    def users(self) -> Users:
        return {user: dict(credentials) for user, credentials in self._users.items()}

    def upsert(self, user: str, credential: ScramCredential) -> None:
        self._users.setdefault(user, {})[credential.mechanism] = credential
        self._changed(user)

    def delete(self, user: str, mechanism: str) -> bool:
        credentials = self._users.get(user)
        if credentials is None or mechanism not in credentials:
            return False
        del credentials[mechanism]
        if not credentials:
            del self._users[user]
        self._changed(user)
        return True

    def _changed(self, user: str) -> None:
        """Note a change of ``user`` for the next ``persist``."""

    async def persist(self) -> None:
        """Make every change so far durable (the answer to the client waits for it)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Stop following changes made elsewhere (nothing to do for a file)."""


class FileCredentialStore(CredentialStore):
    def __init__(self, path: Path | None, users: Users) -> None:
        # path None: kept in memory only (unit tests).
        super().__init__(users)
        self.path = path
        self._writes = asyncio.Lock()

    @classmethod
    def load(cls, log_dir: str | Path) -> FileCredentialStore:
        path = Path(log_dir) / FILE_NAME
        if not path.exists():
            return cls(path, {})
        if path.stat().st_mode & 0o077:
            # Written world-readable by an older josefk: owner only from now on.
            path.chmod(0o600)
        return cls(path, decode(path.read_bytes()))

    async def persist(self) -> None:
        # One write at a time, each of the newest state whole: a later change may already
        # be in it. The file is written off the event loop (fsync).
        async with self._writes:
            data = self.snapshot()
            await asyncio.get_running_loop().run_in_executor(None, self.write, data)

    def save(self) -> None:
        self.write(self.snapshot())

    def snapshot(self) -> bytes:
        """The file's new content, taken on the event loop; ``write`` may then run elsewhere."""
        return encode(self._users)

    def write(self, data: bytes) -> None:
        if self.path is not None:
            # Salted keys, not passwords, but enough to brute-force them offline: owner only,
            # as broker-configs.json.
            write_atomically(self.path, data, mode=0o600)


class EtcdCredentialStore(CredentialStore):
    """The cluster's users, followed from etcd; ``start`` before use, ``close`` at the end.

    A change is written behind: ``upsert`` and ``delete`` note the user's new etcd value at
    once, ``persist`` writes the noted values. Until a value is written, what the watch or a
    reload reports for that user is overlaid by it, so a reload from etcd in the middle (etcd
    restarting, the watch checked) neither loses a change nor writes a stale one back.
    """

    def __init__(self, records: CredentialRecords) -> None:
        super().__init__()
        self._records = records
        # user -> the value to write (None: delete the key), in change order.
        self._pending: dict[str, bytes | None] = {}
        self._follower: asyncio.Task[None] | None = None

    async def start(self) -> None:
        revision, records = await self._records.load()
        self._reload(records)
        self._follower = asyncio.get_running_loop().create_task(
            self._records.follow(revision, records, self._apply, self._reload)
        )

    async def close(self) -> None:
        if self._follower is not None:
            follower, self._follower = self._follower, None
            follower.cancel()
            # Bounded: a follower stuck in the etcd client's watch teardown must not hold
            # the broker's shutdown (the task is left to end when the client closes).
            done, _ = await asyncio.wait({follower}, timeout=_CLOSE_TIMEOUT_S)
            if not done:
                logger.warning("the SCRAM credentials watch did not stop; closing anyway")

    def _changed(self, user: str) -> None:
        credentials = self._users.get(user)
        self._pending[user] = encode_user(credentials) if credentials else None

    async def persist(self) -> None:
        # A failed write leaves its user and every later one pending: the client is told it
        # failed, and the next persist (any user's) tries again.
        for user in list(self._pending):
            if user not in self._pending:
                continue  # written meanwhile by a persist running alongside
            value = self._pending[user]
            if value is None:
                await self._records.delete(user)
            else:
                await self._records.put(user, value)
            if user in self._pending and self._pending[user] is value:  # not changed again
                del self._pending[user]

    def _apply(self, user: str, value: bytes | None) -> None:
        value = self._pending.get(user, value)
        if value is None:
            self._users.pop(user, None)
            return
        try:
            self._users[user] = decode_user(value)
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("ignoring the unreadable SCRAM credentials of %r in etcd: %s", user, exc)

    def _reload(self, records: Mapping[str, bytes]) -> None:
        self._users.clear()
        for user in records.keys() | self._pending.keys():
            self._apply(user, records.get(user))


def encode(users: Users) -> bytes:
    document = {
        "version": _FORMAT_VERSION,
        "users": {
            user: [credential.encode() for _, credential in sorted(credentials.items())]
            for user, credentials in sorted(users.items())
        },
    }
    return json.dumps(document, indent=1, sort_keys=True).encode() + b"\n"


def decode(data: bytes) -> Users:
    document = json.loads(data)
    if not isinstance(document, dict) or document.get("version") != _FORMAT_VERSION:
        raise ValueError(f"{FILE_NAME}: unknown format")
    users: Users = {}
    for user, entries in dict(document.get("users", {})).items():
        for entry in entries:
            credential = ScramCredential.decode(entry)
            users.setdefault(str(user), {})[credential.mechanism] = credential
    return users


def encode_user(credentials: Mapping[str, ScramCredential]) -> bytes:
    """One user's etcd value: the credential file's entries of that user."""
    document = {
        "version": _FORMAT_VERSION,
        "credentials": [credential.encode() for _, credential in sorted(credentials.items())],
    }
    return json.dumps(document, sort_keys=True).encode()


def decode_user(data: bytes) -> dict[str, ScramCredential]:
    document = json.loads(data)
    if not isinstance(document, dict) or document.get("version") != _FORMAT_VERSION:
        raise ValueError("unknown format")
    credentials = [ScramCredential.decode(entry) for entry in document.get("credentials", [])]
    return {credential.mechanism: credential for credential in credentials}
