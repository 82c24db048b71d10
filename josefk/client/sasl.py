"""The client side of the SASL mechanisms josefk speaks: PLAIN (RFC 4616) and SCRAM-SHA-256/512
(RFC 5802, RFC 7677).

Owns ``plain_token`` and ``ScramClient``, one client-side SCRAM exchange: client-first ->
server-first -> client-final -> server-final. The client checks the server's signature in
server-final, so a server that does not know the password (an impostor) cannot complete the
exchange either. Tokens in, tokens out: no sockets, no protocol messages (the connection
carries them in SaslAuthenticate requests).

Imports the standard library and josefk.client.errors only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Final

from josefk.client.errors import KafkaError

SCRAM_DIGESTS: Final[dict[str, str]] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS: Final = ("PLAIN", *SCRAM_DIGESTS)
# RFC 7677 and Kafka's client: fewer iterations than this make the salted password cheap to
# brute-force, and a server asking for fewer is not to be trusted.
MIN_ITERATIONS: Final = 4096


class SaslExchangeError(KafkaError):
    """The broker's side of a SASL exchange was malformed or could not be verified."""

    code = -1
    name = "SASL_AUTHENTICATION_FAILED"
    retriable = False


def plain_token(username: str, password: str) -> bytes:
    """RFC 4616: empty authorization id, NUL, user name, NUL, password."""
    return b"\0" + username.encode() + b"\0" + password.encode()


def _escape(name: str) -> str:
    # RFC 5802 5.1: "=" and "," are written =3D and =2C in the user name.
    return name.replace("=", "=3D").replace(",", "=2C")


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """PBKDF2 of the password, as SCRAM's Hi(); no SASLprep, as Kafka and its clients."""
    return hashlib.pbkdf2_hmac(SCRAM_DIGESTS[mechanism], password, salt, iterations)


class ScramClient:
    """One client-side SCRAM exchange; ``first()``, then ``final(server_first)``, then
    ``verify(server_final)``. Raises SaslExchangeError on anything the server should not
    have said."""

    def __init__(
        self, mechanism: str, username: str, password: str, *, nonce: str | None = None
    ) -> None:
        if mechanism not in SCRAM_DIGESTS:
            raise ValueError(f"{mechanism} is not a SCRAM mechanism")
        self.mechanism = mechanism
        self._digest = SCRAM_DIGESTS[mechanism]
        self._password = password.encode()
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._client_first_bare = f"n={_escape(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        # "n,," : no channel binding, no authorization id.
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        try:
            text = server_first.decode()
        except UnicodeDecodeError:
            raise SaslExchangeError("malformed SCRAM server-first message") from None
        attributes = _attributes(text)
        if "e" in attributes:
            raise SaslExchangeError(f"the broker refused: {attributes['e']}")
        nonce, salt_text, iterations_text = (attributes.get(k) for k in ("r", "s", "i"))
        if nonce is None or salt_text is None or iterations_text is None:
            raise SaslExchangeError("malformed SCRAM server-first message")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslExchangeError("the broker's SCRAM nonce does not extend ours")
        try:
            salt = base64.b64decode(salt_text, validate=True)
            iterations = int(iterations_text)
        except ValueError:
            raise SaslExchangeError("malformed SCRAM salt or iteration count") from None
        if iterations < MIN_ITERATIONS:
            raise SaslExchangeError(
                f"the broker asks for {iterations} SCRAM iterations, fewer than {MIN_ITERATIONS}"
            )
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", self._digest)
        stored_key = hashlib.new(self._digest, client_key).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self._digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._digest)
        self._server_signature = hmac.digest(server_key, auth_message, self._digest)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """Check the server's signature: only a server holding our ServerKey can make it."""
        if self._server_signature is None:
            raise SaslExchangeError("SCRAM server-final before server-first")
        attributes = _attributes(server_final.decode(errors="replace"))
        if "e" in attributes:
            raise SaslExchangeError(f"the broker refused: {attributes['e']}")
        try:
            signature = base64.b64decode(attributes.get("v", ""), validate=True)
        except ValueError:
            signature = b""
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslExchangeError(
                "the broker's SCRAM signature is wrong: it does not hold this user's credential"
            )


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) >= 2 and part[1] == "=":
            out.setdefault(part[0], part[2:])
    return out
