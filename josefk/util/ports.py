"""Free loopback ports for the processes josefk starts on this machine (etcd, brokers'
metrics) in ``josefk dev-cluster`` and ``josefk.testing``.

Owns only the probe; imports nothing of josefk.
"""

from __future__ import annotations

import contextlib
import socket


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` different ports free right now: every probe stays bound until all are
    picked, since a closed probe's port can come straight back to the next one (etcd given
    one port for its client and peer listeners fails with "address already in use")."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind((host, 0))
        return [int(probe.getsockname()[1]) for probe in probes]
