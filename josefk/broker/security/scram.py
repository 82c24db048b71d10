"""SCRAM credentials and the server side of one SCRAM exchange (RFC 5802, RFC 7677).

A credential keeps the salt, the iteration count, StoredKey and ServerKey: never the
password, from which only a client that knows it can build a proof. Imports the standard
library only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

MECHANISMS: Final[dict[str, str]] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's minimum (and RFC 7677's recommendation) for the PBKDF2 iteration count.
MIN_ITERATIONS: Final = 4096
MAX_ITERATIONS: Final = 16384
DEFAULT_ITERATIONS: Final = 4096
FAILED: Final = "Authentication failed: Invalid username or password"


class ScramError(Exception):
    """The exchange cannot go on; the message is safe to send to the client."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def encode(self) -> dict[str, object]:
        return {
            "mechanism": self.mechanism,
            "salt": base64.b64encode(self.salt).decode(),
            "iterations": self.iterations,
            "stored_key": base64.b64encode(self.stored_key).decode(),
            "server_key": base64.b64encode(self.server_key).decode(),
        }

    @classmethod
    def decode(cls, data: dict[str, object]) -> ScramCredential:
        mechanism = str(data["mechanism"])
        if mechanism not in MECHANISMS:
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
        iterations = data["iterations"]
        if not isinstance(iterations, int) or iterations < 1:
            raise ValueError(f"bad iteration count {iterations!r}")
        return cls(
            mechanism=mechanism,
            salt=base64.b64decode(str(data["salt"]), validate=True),
            iterations=iterations,
            stored_key=base64.b64decode(str(data["stored_key"]), validate=True),
            server_key=base64.b64decode(str(data["server_key"]), validate=True),
        )

    def matches(self, password: bytes) -> bool:
        """Whether ``password`` is this credential's (PLAIN checks a user this way)."""
        salted = salted_password(self.mechanism, password, self.salt, self.iterations)
        stored_key, _ = _keys(self.mechanism, salted)
        return hmac.compare_digest(stored_key, self.stored_key)


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    # Kafka normalises nothing (no SASLprep), and neither do its clients: bytes as given.
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password, salt, iterations)


def _keys(mechanism: str, salted: bytes) -> tuple[bytes, bytes]:
    digest = MECHANISMS[mechanism]
    client_key = hmac.digest(salted, b"Client Key", digest)
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", digest)
    return stored_key, server_key


def make_credential(
    mechanism: str,
    password: bytes,
    *,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
    salt = secrets.token_bytes(32) if salt is None else salt
    return credential_from_salted(
        mechanism, salt, iterations, salted_password(mechanism, password, salt, iterations)
    )


def credential_from_salted(
    mechanism: str, salt: bytes, iterations: int, salted: bytes
) -> ScramCredential:
    """What AlterUserScramCredentials sends: the client salts and hashes, the broker keeps."""
    stored_key, server_key = _keys(mechanism, salted)
    return ScramCredential(mechanism, salt, iterations, stored_key, server_key)


def _attributes(message: str) -> list[tuple[str, str]]:
    pairs = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"{FAILED} (malformed SCRAM message)")
        pairs.append((part[0], part[2:]))
    return pairs


def _unescape(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError(f"{FAILED} (malformed SCRAM user name)")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One server-side SCRAM exchange: client-first -> server-first, client-final ->
    server-final. ``lookup`` returns the user's credential or None; an unknown user goes
    through the exchange with a made-up credential and fails where a wrong password fails,
    so the client cannot tell the two apart."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str, str], ScramCredential | None],
        *,
        nonce: str | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._credential: ScramCredential | None = None
        self._known = False
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.username: str | None = None
        self.complete = False

    def step(self, token: bytes) -> bytes:
        if self._credential is None:
            return self._first(token)
        if not self.complete and self._server_first:
            return self._final(token)
        raise ScramError(f"{FAILED} (unexpected SCRAM message)")

    def _first(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError(f"{FAILED} (malformed SCRAM message)") from None
        parts = message.split(",", 2)
        if len(parts) != 3:
            raise ScramError(f"{FAILED} (malformed SCRAM message)")
        binding, authzid, bare = parts
        if binding not in ("n", "y"):
            # "p=..." asks for channel binding, which Kafka does not offer either.
            raise ScramError(f"{FAILED} (channel binding is not supported)")
        fields = bare.split(",")
        if len(fields) < 2 or not fields[0].startswith("n=") or not fields[1].startswith("r="):
            raise ScramError(f"{FAILED} (malformed SCRAM client-first message)")
        username = _unescape(fields[0][2:])
        client_nonce = fields[1][2:]
        if not client_nonce:
            raise ScramError(f"{FAILED} (malformed SCRAM client-first message)")
        for extension in fields[2:]:
            # Extensions (KIP-84): tokenauth asks for delegation tokens, which josefk lacks.
            key, _, value = extension.partition("=")
            if key == "tokenauth" and value.lower() == "true":
                raise ScramError(f"{FAILED} (delegation tokens are not supported)")
        if authzid and (not authzid.startswith("a=") or _unescape(authzid[2:]) != username):
            raise ScramError(f"{FAILED} (authorization id differs from the user name)")
        credential = self._lookup(username, self.mechanism)
        self._known = credential is not None
        if credential is None:
            credential = _decoy(self.mechanism, username)
        self._credential = credential
        self.username = username
        self._gs2_header = f"{binding},{authzid},"
        self._client_first_bare = bare
        self._nonce = client_nonce + self._server_nonce
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _final(self, token: bytes) -> bytes:
        credential = self._credential
        assert credential is not None
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError(f"{FAILED} (malformed SCRAM message)") from None
        attributes = _attributes(message)
        if (
            len(attributes) < 3
            or attributes[0][0] != "c"
            or attributes[1][0] != "r"
            or attributes[-1][0] != "p"
        ):
            raise ScramError(f"{FAILED} (malformed SCRAM client-final message)")
        expected_binding = base64.b64encode(self._gs2_header.encode()).decode()
        # RFC 5802 wants the client's nonce to be the server's exactly. librdkafka before
        # 2.6.1 (its PR 4895; Debian's kcat among its users) prepends its own nonce once more;
        # Kafka 3.8.1-3.9 accepted a nonce that ends with the server's, and so does josefk:
        # the client has still shown that it read this exchange's server nonce.
        if attributes[0][1] != expected_binding or not attributes[1][1].endswith(self._nonce):
            raise ScramError(FAILED)
        try:
            proof = base64.b64decode(attributes[-1][1], validate=True)
        except ValueError:
            raise ScramError(f"{FAILED} (malformed SCRAM proof)") from None
        without_proof = message[: message.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        digest = MECHANISMS[self.mechanism]
        signature = hmac.digest(credential.stored_key, auth_message, digest)
        if len(proof) != len(signature):
            raise ScramError(FAILED)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        stored_key = hashlib.new(digest, client_key).digest()
        if not hmac.compare_digest(stored_key, credential.stored_key) or not self._known:
            raise ScramError(FAILED)
        self.complete = True
        verifier = hmac.digest(credential.server_key, auth_message, digest)
        return b"v=" + base64.b64encode(verifier)


_DECOY_KEY: Final = secrets.token_bytes(32)


def _decoy(mechanism: str, username: str) -> ScramCredential:
    """A stable made-up credential for an unknown user: the same salt on every attempt, as a
    real user's would be, so that probing cannot tell unknown users from known ones."""
    digest = MECHANISMS[mechanism]
    salt = hmac.digest(_DECOY_KEY, f"{mechanism}:{username}".encode(), digest)[:32]
    random = secrets.token_bytes(hashlib.new(digest).digest_size)
    return ScramCredential(mechanism, salt, DEFAULT_ITERATIONS, random, random)
