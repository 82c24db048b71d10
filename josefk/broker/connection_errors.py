"""What a request's processing raises to end its connection rather than answer it.

Owns ``CloseConnection``. Its own module, importing nothing, because three layers that may not
import each other's modules share it: the network layer (which closes), the dispatcher and
the handlers (which raise it; handlers must not import josefk.broker.network or the
dispatcher, tests/test_layering.py).
"""

from __future__ import annotations


class CloseConnection(Exception):
    """Raised by a dispatcher or a handler when a request cannot be answered: the connection
    is closed after the responses before it are written, and the reason is logged."""
