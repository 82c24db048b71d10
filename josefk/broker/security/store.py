"""The SCRAM credential store of a single node: one JSON file in the first log dir.

Owns ``CredentialStore``: users' SCRAM credentials by mechanism, loaded at start-up and
rewritten whole and atomically on every change (``josefk.fileio.write_atomically``), so a
crash leaves the old file or the new one. Only salts, iteration counts, StoredKeys and
ServerKeys are written, never a password. Must not import josefk.broker.network or the
handlers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from josefk.broker.security.scram import ScramCredential
from josefk.fileio import write_atomically

FILE_NAME: Final = "scram-credentials.json"
_FORMAT_VERSION: Final = 1


class CredentialStore:
    def __init__(self, path: Path | None, users: dict[str, dict[str, ScramCredential]]) -> None:
        # path None: kept in memory only (unit tests).
        self.path = path
        self._users = users

    @classmethod
    def load(cls, log_dir: str | Path) -> CredentialStore:
        path = Path(log_dir) / FILE_NAME
        if not path.exists():
            return cls(path, {})
        return cls(path, decode(path.read_bytes()))

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def any_credential(self, user: str) -> ScramCredential | None:
        """The strongest credential of ``user``: what PLAIN checks a password against."""
        credentials = self._users.get(user, {})
        return credentials.get("SCRAM-SHA-512") or credentials.get("SCRAM-SHA-256")

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {user: dict(credentials) for user, credentials in self._users.items()}

    def upsert(self, user: str, credential: ScramCredential) -> None:
        self._users.setdefault(user, {})[credential.mechanism] = credential

    def delete(self, user: str, mechanism: str) -> bool:
        credentials = self._users.get(user)
        if credentials is None or mechanism not in credentials:
            return False
        del credentials[mechanism]
        if not credentials:
            del self._users[user]
        return True

    def save(self) -> None:
        self.write(self.snapshot())

    def snapshot(self) -> bytes:
        """The file's new content, taken on the event loop; ``write`` may then run elsewhere."""
        return encode(self._users)

    def write(self, data: bytes) -> None:
        if self.path is not None:
            write_atomically(self.path, data)


def encode(users: dict[str, dict[str, ScramCredential]]) -> bytes:
    document = {
        "version": _FORMAT_VERSION,
        "users": {
            user: [credential.encode() for _, credential in sorted(credentials.items())]
            for user, credentials in sorted(users.items())
        },
    }
    return json.dumps(document, indent=1, sort_keys=True).encode() + b"\n"


def decode(data: bytes) -> dict[str, dict[str, ScramCredential]]:
    document = json.loads(data)
    if not isinstance(document, dict) or document.get("version") != _FORMAT_VERSION:
        raise ValueError(f"{FILE_NAME}: unknown format")
    users: dict[str, dict[str, ScramCredential]] = {}
    for user, entries in dict(document.get("users", {})).items():
        for entry in entries:
            credential = ScramCredential.decode(entry)
            users.setdefault(str(user), {})[credential.mechanism] = credential
    return users
