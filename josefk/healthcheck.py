"""``python -m josefk.healthcheck [HOST:PORT]``: exit 0 when a broker there answers ApiVersions.

The container image's HEALTHCHECK. It runs every few seconds beside the broker, so it imports
nothing of josefk (a check costs ~30 ms of CPU, not the CLI's ~250 ms) and speaks the one
request it needs by hand: ApiVersions v0, whose frame and answer have not changed since Kafka
0.10. Without an address it asks the first listener of ``JOSEFK_LISTENERS`` (the container's
configuration), on the loopback address when that listener binds every interface.

A cluster broker (``JOSEFK_ETCD_ENDPOINTS`` and ``JOSEFK_NODE_ID`` set) is healthy only once it
lists itself among the brokers of a Metadata answer: registered in etcd and not fenced, so
``docker compose up --wait`` returns when every broker has joined the cluster.

Must not import the rest of josefk.
"""

from __future__ import annotations

import os
import socket
import struct
import sys

_API_VERSIONS = 18
_METADATA = 3
_CORRELATION_ID = 0x4A4B
_CLIENT_ID = b"josefk-healthcheck"


def _frame(api_key: int, version: int, body: bytes = b"") -> bytes:
    header = struct.pack(">hhih", api_key, version, _CORRELATION_ID, len(_CLIENT_ID))
    request = header + _CLIENT_ID + body
    return struct.pack(">i", len(request)) + request


_API_VERSIONS_FRAME = _frame(_API_VERSIONS, 0)
# Metadata v1 for no topics (an empty array; v0 would mean every topic): just the brokers.
_METADATA_FRAME = _frame(_METADATA, 1, struct.pack(">i", 0))


def target(argv: list[str], environ: dict[str, str]) -> tuple[str, int]:
    """The address to ask: the argument, else the first of JOSEFK_LISTENERS, else :9092."""
    if argv:
        host, _, port = argv[0].rpartition(":")
        return host or "127.0.0.1", int(port)
    listeners = environ.get("JOSEFK_LISTENERS", "").split(",")[0].strip()
    if "://" not in listeners:
        return "127.0.0.1", 9092
    host, _, port = listeners.split("://", 1)[1].rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return host, int(port)


def _receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return bytes(data)


def _answer(sock: socket.socket, frame: bytes) -> bytes:
    """Send one request; its answer after the correlation id."""
    sock.sendall(frame)
    (size,) = struct.unpack(">i", _receive_exactly(sock, 4))
    if size < 6:
        raise ValueError(f"a {size}-byte answer")
    answer = _receive_exactly(sock, size)
    (correlation_id,) = struct.unpack_from(">i", answer)
    if correlation_id != _CORRELATION_ID:
        raise ValueError(f"the answer to another request ({correlation_id})")
    return answer[4:]


def _broker_ids(metadata_v1: bytes) -> list[int]:
    (count,) = struct.unpack_from(">i", metadata_v1)
    at, ids = 4, []
    for _ in range(count):
        node_id, host_size = struct.unpack_from(">ih", metadata_v1, at)
        at += 6 + host_size + 4  # node id, host, port
        (rack_size,) = struct.unpack_from(">h", metadata_v1, at)
        at += 2 + max(rack_size, 0)
        ids.append(node_id)
    return ids


def check(host: str, port: int, node_id: int | None = None, timeout_s: float = 3.0) -> str | None:
    """None when the broker answers ApiVersions without error (and, given ``node_id``, lists
    that broker in its Metadata); else what went wrong."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            (error_code,) = struct.unpack_from(">h", _answer(sock, _API_VERSIONS_FRAME))
            if error_code != 0:
                return f"{host}:{port} answered ApiVersions with error {error_code}"
            if node_id is not None and node_id not in _broker_ids(_answer(sock, _METADATA_FRAME)):
                return f"broker {node_id} is not registered in the cluster (yet)"
    except OSError as exc:
        return f"{host}:{port}: {exc}"
    except (ValueError, struct.error) as exc:
        return f"{host}:{port} is not a Kafka broker: {exc}"
    return None


def cluster_node_id(environ: dict[str, str]) -> int | None:
    """The broker's id when it runs in a cluster (the container's configuration)."""
    if not environ.get("JOSEFK_ETCD_ENDPOINTS"):
        return None
    value = environ.get("JOSEFK_NODE_ID") or environ.get("JOSEFK_BROKER_ID")
    return int(value) if value else None


def main() -> int:
    environ = dict(os.environ)
    host, port = target(sys.argv[1:], environ)
    problem = check(host, port, cluster_node_id(environ))
    if problem is not None:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
