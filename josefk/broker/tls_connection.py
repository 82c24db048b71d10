"""A connection of an SSL or SASL_SSL listener: the TLS handshake and the encrypted stream.

Owns ``TlsConnection``, a ``network.Connection`` whose byte-moving primitives go through an
``ssl.SSLObject`` over two memory BIOs on the same raw non-blocking socket (uvloop's ``sock_*``
methods refuse an ``SSLSocket``). Everything else (framing, request order, flow control, the
broker-wide gate) is the plain connection's code, unchanged.

- Handshake: the reader task runs it first, bounded by ``josefk.ssl.handshake.timeout.ms``; a
  failure (a bad or missing certificate, a client that is not speaking TLS, a timeout) is
  logged at info with the peer, counted, and closes this connection only: every connection
  has its own task, so a stalled handshake never holds up another client.
- Reading: ciphertext is received into a reused buffer and fed to the incoming BIO; the
  plaintext is read straight into the connection's receive chunk, so frames are memoryviews
  into it exactly as on PLAINTEXT.
- Writing: ``SSLObject.write`` encrypts into the outgoing BIO; what it holds goes to the socket
  in the order it was produced. Only one side sends at a time: the reader (answers ready while
  the writer is idle, or a TLS message produced by a read) sends without waiting and leaves
  the rest to the writer, which is the only one that waits for the socket.
- File regions: ``sendfile`` cannot encrypt, so each region is read with ``os.preadv`` into
  one reused buffer and encrypted from a memoryview of it, a chunk at a time, each chunk's
  ciphertext handed to the socket before the next is read (memory stays bounded).

Imports the network layer, the TLS listener holder and framing's buffers; nothing imports it but
server.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
from typing import Any

from josefk.broker.network import Connection, ConnectionInfo, Dispatcher, FileRegion
from josefk.broker.security.tls import CertificateParseError, TlsListener
from josefk.protocol.framing import frame_buffer

logger = logging.getLogger(__name__)

# Ciphertext received at once: several TLS records (16 KiB at most each), about what
# Kafka's 100 KiB socket.receive.buffer.bytes holds (the OS's buffer, josefk's default,
# may hold more: the next receive takes the rest).
_CIPHER_CHUNK = 128 * 1024
# A connection's first ciphertext buffer: one whole TLS record and its header.
_SMALL_CIPHER_CHUNK = 17 * 1024
# Plaintext encrypted before its ciphertext is handed to the socket: bounds the outgoing BIO.
_ENCRYPT_SLICE = 256 * 1024
# File bytes read per preadv on the fetch path.
_FILE_CHUNK = 256 * 1024


class TlsConnection(Connection):
    def __init__(
        self,
        sock: socket.socket,
        info: ConnectionInfo,
        dispatcher: Dispatcher,
        *,
        tls: TlsListener,
        **options: Any,
    ) -> None:
        super().__init__(sock, info, dispatcher, **options)
        self._tls = tls
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        # The listener's context at accept time: a reloaded keystore is for new connections.
        self._ssl = tls.context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        # Sized like the plaintext chunks: small until a receive fills it (the client streams).
        self._cipher_in = memoryview(frame_buffer(_SMALL_CIPHER_CHUNK))
        self._file_buffer: memoryview | None = None
        # Ciphertext taken from the outgoing BIO that the socket has not taken yet.
        self._unsent: memoryview | None = None
        # True while the writer waits for the socket with ciphertext in hand: nobody else
        # may send then, or bytes would overtake the ones it holds.
        self._sending = False
        # The SASL principal comes later; until the handshake ends nobody is authenticated.
        info.principal = None
        self._established = False

    # -- the handshake ---------------------------------------------------------------------

    async def _read_frames(self) -> None:
        try:
            async with asyncio.timeout(self._tls.handshake_timeout_s):
                await self._handshake()
            principal = self._tls.principal(self._ssl.getpeercert(binary_form=True))
        except TimeoutError:
            self._handshake_failed("timeout", "no handshake within josefk.ssl.handshake.timeout.ms")
            return
        except (ssl.SSLError, CertificateParseError) as exc:
            # The alert OpenSSL wrote (unknown CA, certificate required) tells the client why.
            self._push_out()
            self._handshake_failed("refused", getattr(exc, "reason", None) or str(exc))
            return
        except (ConnectionError, OSError) as exc:
            self._handshake_failed("disconnected", str(exc) or type(exc).__name__)
            return
        self.info.principal = principal
        self._established = True
        self._tls.handshake_ended(True)
        cipher = self._ssl.cipher()
        logger.debug(
            "TLS from %s on %s: %s, %s, %s",
            self.info.peer,
            self.info.listener_name,
            self._ssl.version(),
            cipher[0] if cipher else "no cipher",
            principal or "principal from SASL",
        )
        await super()._read_frames()

    async def _handshake(self) -> None:
        while True:
            try:
                self._ssl.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            await self._flush()
            if not await self._fill():
                raise ConnectionResetError("the client closed the connection")
        # The server's last flight (TLS 1.3: Finished went earlier; session tickets now).
        await self._flush()

    def _handshake_failed(self, kind: str, detail: str) -> None:
        """``kind`` is the metric's reason: timeout, refused or disconnected."""
        logger.info(
            "TLS handshake with %s on listener %s failed (%s): %s; closing",
            self.info.peer,
            self.info.listener_name,
            kind,
            detail,
        )
        self._tls.handshake_ended(False, kind)
        self.close()

    # -- reading ---------------------------------------------------------------------------

    async def _fill(self) -> bool:
        """Receive ciphertext into the incoming BIO; False when the peer closed."""
        view = self._cipher_in
        try:
            received = self.sock.recv_into(view)
        except BlockingIOError:
            self._send_ready()
            received = await self._loop.sock_recv_into(self.sock, view)
        if received == 0:
            return False
        self._incoming.write(view[:received])
        if received == len(view) and len(view) < _CIPHER_CHUNK:
            self._cipher_in = memoryview(frame_buffer(_CIPHER_CHUNK))
        return True

    async def _receive(self, into: memoryview) -> int:
        """Plaintext into ``into``: every whole TLS record already received, else wait for
        more ciphertext. 0 when the client closed (close_notify or end of stream)."""
        size = len(into)
        while True:
            got = 0
            closed = False
            try:
                while got < size:
                    # With a buffer, read() returns a count (typeshed says bytes).
                    read: int = self._ssl.read(size - got, into[got:])  # type: ignore[arg-type, assignment]
                    if read == 0:
                        closed = True
                        break
                    got += read
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                closed = True  # the client's close_notify
            if self._outgoing.pending:
                # A read can produce a message to send (a TLS 1.3 key update's answer).
                self._push_out()
            if got:
                return got
            if closed or not await self._fill():
                return 0

    # -- writing ---------------------------------------------------------------------------

    def _push_out(self) -> bool:
        """Send ciphertext without waiting; True when nothing is left to send."""
        if self._sending:
            return False
        while True:
            if self._unsent is None:
                if not self._outgoing.pending:
                    return True
                self._unsent = memoryview(self._outgoing.read())
            try:
                sent = self.sock.send(self._unsent)
            except BlockingIOError:
                return False
            if sent < len(self._unsent):
                self._unsent = self._unsent[sent:]
                return False
            self._unsent = None

    async def _flush(self) -> None:
        """Send every byte of ciphertext produced so far, waiting for the socket."""
        while not self._push_out():
            self._sending = True
            try:
                await self._writable()
            finally:
                self._sending = False

    def _send_now(self, data: bytes) -> memoryview | None:
        self._ssl.write(data)
        # What the socket leaves over is the writer's: an empty piece wakes it to flush.
        return None if self._push_out() else memoryview(b"")

    async def _sock_sendall(self, pieces: list[bytes | bytearray | memoryview]) -> None:
        if not pieces:
            return
        data = memoryview(pieces[0] if len(pieces) == 1 else b"".join(pieces))
        for start in range(0, len(data), _ENCRYPT_SLICE):
            self._ssl.write(data[start : start + _ENCRYPT_SLICE])
            await self._flush()
        if not len(data):
            await self._flush()

    async def _sendfile(self, region: FileRegion) -> None:
        if self._file_buffer is None:
            self._file_buffer = memoryview(bytearray(_FILE_CHUNK))
        buffer = self._file_buffer
        source, position, remaining = region.fd, region.position, region.size
        while remaining > 0:
            chunk = buffer[: min(remaining, _FILE_CHUNK)]
            read = os.preadv(source, [chunk], position)
            if read == 0:
                raise ConnectionAbortedError(f"file region ended {remaining} bytes early")
            self._ssl.write(chunk[:read])
            position += read
            remaining -= read
            await self._flush()

    def close(self) -> None:
        if self._established and not self._sending and not self._closed:
            # close_notify, as a TLS peer should say goodbye; best effort, never waited for.
            self._established = False
            with contextlib.suppress(ssl.SSLError, OSError, ValueError):
                self._ssl.unwrap()
            with contextlib.suppress(OSError):
                self._push_out()
        super().close()
