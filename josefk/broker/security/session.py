"""One connection's SASL state: the mechanism chosen by SaslHandshake, the exchange under
way, and the principal once authenticated (KIP-152, KIP-368).

Owns ``SaslSession`` and ``AuthenticationFailed``. The handlers drive it; it knows neither
the protocol messages nor the network layer, only tokens in and tokens out.
"""

from __future__ import annotations

from typing import Final

from josefk.broker.security.scram import FAILED, MECHANISMS, ScramError, ScramServer
from josefk.broker.security.store import CredentialStore


class AuthenticationFailed(Exception):
    """The client gave wrong or malformed credentials; the message may go to the client."""


class IllegalSaslState(Exception):
    """A SASL request out of order (authenticate before handshake, a second handshake)."""


PLAIN: Final = "PLAIN"


class SaslSession:
    def __init__(self, mechanisms: tuple[str, ...], store: CredentialStore) -> None:
        self.enabled = mechanisms
        self._store = store
        self.mechanism: str | None = None
        self._scram: ScramServer | None = None
        self.principal: str | None = None
        # monotonic ms after which the session has expired (KIP-368), None: never.
        self.expires_at_ms: int | None = None
        self.reauthenticating = False
        # After a v0 SaslHandshake the tokens come as raw frames, not SaslAuthenticate.
        self.raw_tokens = False

    def handshake(self, mechanism: str) -> bool:
        """Whether ``mechanism`` is enabled; it is then the one this exchange uses."""
        if self.mechanism is not None and not self.reauthenticating:
            raise IllegalSaslState("SaslHandshake received twice")
        if mechanism not in self.enabled:
            return False
        if self.reauthenticating and self.mechanism is not None and mechanism != self.mechanism:
            # KIP-368: a re-authentication must use the mechanism of the first one.
            return False
        self.mechanism = mechanism
        self._scram = None
        return True

    def begin_reauthentication(self) -> None:
        self.reauthenticating = True

    @property
    def expecting_token(self) -> bool:
        return self.mechanism is not None and (self.principal is None or self.reauthenticating)

    def plain_credentials(self, token: bytes) -> tuple[str, bytes]:
        """RFC 4616: ``authzid NUL authcid NUL passwd``; Kafka refuses an authzid that is
        not the user itself."""
        parts = token.split(b"\0")
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise AuthenticationFailed(f"{FAILED} (malformed PLAIN message)")
        try:
            authzid, user = parts[0].decode(), parts[1].decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed(f"{FAILED} (malformed PLAIN message)") from None
        if authzid and authzid != user:
            raise AuthenticationFailed(f"{FAILED} (authorization id differs from the user name)")
        return user, parts[2]

    def check_plain(self, user: str, password: bytes) -> None:
        """Checks the password against the user's SCRAM credential (PBKDF2: run it off the
        event loop, the caller does)."""
        credential = self._store.any_credential(user)
        if credential is None or not credential.matches(password):
            raise AuthenticationFailed(FAILED)
        self._authenticated(user)

    def scram_step(self, token: bytes) -> bytes:
        mechanism = self.mechanism
        assert mechanism in MECHANISMS
        if self._scram is None:
            self._scram = ScramServer(mechanism, self._store.get)
        try:
            answer = self._scram.step(token)
        except ScramError as exc:
            raise AuthenticationFailed(str(exc)) from None
        if self._scram.complete:
            assert self._scram.username is not None
            self._authenticated(self._scram.username)
        return answer

    def raw_step(self, token: bytes) -> bytes:
        """One raw token after a v0 handshake: the answer token, or AuthenticationFailed (the
        caller closes the connection: a raw exchange has no way to carry an error)."""
        if self.mechanism == PLAIN:
            self.check_plain(*self.plain_credentials(token))
            return b""
        return self.scram_step(token)

    def _authenticated(self, user: str) -> None:
        principal = f"User:{user}"
        if self.reauthenticating and principal != self.principal:
            # KIP-368: the principal of a connection never changes.
            raise AuthenticationFailed(f"{FAILED} (re-authentication as another principal)")
        self.principal = principal
        self.reauthenticating = False
