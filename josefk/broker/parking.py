"""Parked requests: how a request that waits for something to happen (a long-poll fetch, an
acks=all produce, a JoinGroup waiting for its group) gives back its place in the broker-wide
request gate (``queued.max.requests``), as Kafka's request queue holds only requests waiting
for a handler.

Owns ``ON_PARK``, the context variable the network layer sets around each dispatch (tasks the
handler starts copy it), and ``request_parked``, which purgatories and handlers call when they
park. Imports nothing from josefk, so that handlers may use it without reaching the network.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable

ON_PARK: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "josefk_on_park", default=None
)


def request_parked() -> None:
    """The request being handled in this context parks: it stops counting against
    ``queued.max.requests``. Idempotent; a no-op outside a request's context."""
    leave = ON_PARK.get()
    if leave is not None:
        leave()
