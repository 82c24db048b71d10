"""Security benchmark: produce and fetch over SSL and SASL_SSL next to PLAINTEXT, and the time
to set up an authenticated connection.

One ``josefk serve`` with three listeners (PLAINTEXT, SSL with client certificates required,
SASL_SSL with SCRAM), test certificates made with the openssl command line
(``tests/tls_pki.py``), and in the same run:

- produce (confluent-kafka, 1 KiB messages, acks=1) and fetch (confluent-kafka consumer, the
  same messages from the beginning) on each listener, each on a topic of its own, with the
  broker process's own CPU seconds per GB moved (utime + stime from /proc) beside MB/s,
  after ``--warm-gb`` of file data is written and deleted (``warm_memory``) so that produce
  writes into warm pages, as a broker that keeps up with retention does;
- connection set-up, p50 and p99 over many connections: connect + ApiVersions on PLAINTEXT
  (the baseline), connect + TLS handshake + ApiVersions on SSL, and connect + TLS handshake +
  SaslHandshake + the SCRAM exchange on SASL_SSL, for SCRAM-SHA-256 and SCRAM-SHA-512 (the
  broker's iterations: 4096, Kafka's default).

    python bench/security_bench.py            # prints a Markdown table
    python bench/security_bench.py --quick    # smaller counts
    python bench/security_bench.py --rounds 3 --baseline-ref d487483   # beside a baseline

With ``--baseline-ref REF`` a second broker runs REF's code (a temporary ``git worktree``)
and the throughput rounds alternate between the two; each figure is the median of the
rounds, and each listener's CPU per GB is also given as a multiple of PLAINTEXT's.

Not a test: nothing here asserts. The clients run on the same cores as the broker.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import hmac
import itertools
import os
import re
import socket
import ssl
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from serve_process import (
    ROOT,
    THROUGHPUT_PRODUCER,
    ServeProcess,
    baseline_tree,
    cpu_seconds,
    fetch_all,
    produce_all,
    warm_memory,
)

sys.path.insert(0, str(ROOT / "tests"))
from tls_pki import Pki, make_pki  # the tests' certificate maker, shared

from josefk.broker.security.scram import make_credential
from josefk.broker.security.store import CredentialStore
from josefk.protocol.api import ApiKey, decode_response, encode_request, request_class
from josefk.protocol.headers import RequestHeader

USER, PASSWORD = "bench", "bench-secret"


def start_broker(data: Path, pki: Pki, root: Path = ROOT) -> tuple[ServeProcess, dict[str, str]]:
    data.mkdir(parents=True)
    store = CredentialStore.load(data)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        store.upsert(USER, make_credential(mechanism, PASSWORD.encode()))
    store.save()
    broker = ServeProcess(
        data,
        [
            "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            f"ssl.keystore.location={pki.server_keystore}",
            f"ssl.truststore.location={pki.ca}",
            "listener.name.ssl.ssl.client.auth=required",
        ],
        root=root,
    )
    bootstraps = {"PLAINTEXT": broker.bootstrap}
    assert broker.process.stdout is not None
    while len(bootstraps) < 3:
        match = re.search(r"listening on (\w+)://([^:]+):(\d+)", broker.process.stdout.readline())
        if match:
            bootstraps[match.group(1)] = f"{match.group(2)}:{match.group(3)}"
    return broker, bootstraps


def client_settings(listener: str, pki: Pki) -> dict[str, Any]:
    if listener == "SSL":
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(pki.alice_cert),
            "ssl.key.location": str(pki.alice_key),
        }
    if listener == "SASL_SSL":
        return {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": USER,
            "sasl.password": PASSWORD,
        }
    return {}


def produce(bootstrap: str, topic: str, count: int, size: int, auth: dict[str, Any]) -> float:
    """Seconds to produce ``count`` messages after a warm-up message is acknowledged."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            **THROUGHPUT_PRODUCER,
            **auth,
        }
    )
    value = os.urandom(size)
    producer.produce(topic, value)
    producer.flush(30)
    started = time.perf_counter()
    produce_all(producer, topic, value, count)
    if producer.flush(300):
        raise RuntimeError("messages left undelivered")
    return time.perf_counter() - started


def fetch(bootstrap: str, topic: str, count: int, auth: dict[str, Any]) -> float:
    return fetch_all(bootstrap, topic, count, **auth)[1]


# ------------------------------------------------------------------------------ set-up time


class Raw:
    """A blocking connection speaking josefk's codec, optionally over TLS."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.ids = itertools.count(1)

    def call(self, api_key: ApiKey, version: int, **fields: Any) -> Any:
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=next(self.ids),
            client_id="bench",
        )
        self.sock.sendall(encode_request(header, request_class(api_key)(**fields)))
        (size,) = struct.unpack(">i", self._exactly(4))
        return decode_response(self._exactly(size), api_key, version)[1]

    def _exactly(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return bytes(data)


def scram_client(raw: Raw, mechanism: str) -> None:
    """RFC 5802's client side over SaslHandshake v1 + SaslAuthenticate v1."""
    digest = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    answer = raw.call(ApiKey.SASL_HANDSHAKE, 1, mechanism=mechanism)
    assert answer.error_code == 0, answer
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n={USER},r={nonce}"
    reply = raw.call(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=f"n,,{first_bare}".encode())
    assert reply.error_code == 0, reply
    server_first = bytes(reply.auth_bytes).decode()
    parts = dict(item.split("=", 1) for item in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        digest, PASSWORD.encode(), base64.b64decode(parts["s"]), int(parts["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", digest)
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c=biws,r={parts['r']}"
    message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(stored_key, message, digest)
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    final = f"{without_proof},p={proof.decode()}".encode()
    reply = raw.call(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=final)
    assert reply.error_code == 0, reply


def setup_times(connect: Callable[[], None], count: int) -> tuple[float, float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        connect()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def connector(bootstrap: str, pki: Pki, kind: str) -> Callable[[], None]:
    host, port = bootstrap.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(pki.ca))
    if kind == "SSL":
        context.load_cert_chain(pki.alice_cert, pki.alice_key)

    def connect() -> None:
        sock = socket.create_connection((host, int(port)), timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if kind != "PLAINTEXT":
                sock = context.wrap_socket(sock, server_hostname="localhost")
            raw = Raw(sock)
            if kind.startswith("SCRAM"):
                scram_client(raw, kind)
            raw.call(ApiKey.API_VERSIONS, 0)
        finally:
            sock.close()

    return connect


def throughput_round(
    broker: ServeProcess,
    bootstraps: dict[str, str],
    pki: Pki,
    count: int,
    size: int,
    suffix: str,
) -> list[tuple[str, float, float, float, float]]:
    """Produce then fetch ``count`` messages on each listener, each on a topic of its own:
    (listener, produce MB/s, broker CPU s/GB, fetch MB/s, broker CPU s/GB) per listener."""
    pid = broker.process.pid
    admin = AdminClient({"bootstrap.servers": bootstraps["PLAINTEXT"]})
    rows = []
    for listener in ("PLAINTEXT", "SSL", "SASL_SSL"):
        topic = f"bench-{listener.lower()}{suffix}"
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        auth = client_settings(listener, pki)
        gigabytes = count * size / 1e9
        cpu0 = cpu_seconds(pid)
        produce_s = produce(bootstraps[listener], topic, count, size, auth)
        cpu1 = cpu_seconds(pid)
        fetch_s = fetch(bootstraps[listener], topic, count + 1, auth)
        cpu2 = cpu_seconds(pid)
        rows.append(
            (
                listener,
                gigabytes * 1000 / produce_s,
                (cpu1 - cpu0) / gigabytes,
                gigabytes * 1000 / fetch_s,
                (cpu2 - cpu1) / gigabytes,
            )
        )
        print(f"{suffix} {listener}: {rows[-1][1:]}", file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller counts, a smoke run")
    parser.add_argument("--messages", type=int, default=0, help="1 KiB messages per listener")
    parser.add_argument("--connections", type=int, default=0, help="connections per kind")
    parser.add_argument("--rounds", type=int, default=1, help="throughput rounds per broker")
    parser.add_argument(
        "--baseline-ref",
        default="",
        help="also run this git ref's broker (a temporary worktree), rounds alternating",
    )
    parser.add_argument(
        "--warm-gb",
        type=float,
        default=-1,
        help="GB written and deleted before each round (warm_memory); default: 1.5x what the"
        " round writes; 0: none",
    )
    args = parser.parse_args()
    count = args.messages or (20_000 if args.quick else 300_000)
    connections = args.connections or (50 if args.quick else 500)
    size = 1024
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="josefk-security-bench-"))
        trees = [("this tree", ROOT)]
        if args.baseline_ref:
            trees.append((args.baseline_ref, stack.enter_context(baseline_tree(args.baseline_ref))))
        pki = make_pki(Path(scratch, "pki"))
        brokers = []
        try:
            for index, (_, root) in enumerate(trees):
                brokers.append(start_broker(Path(scratch, f"data{index}"), pki, root))
            results: dict[int, list[list[tuple[str, float, float, float, float]]]] = {
                index: [] for index in range(len(trees))
            }
            # Three listeners' messages are written per round; without warming, produce pays
            # this VM's first-touch cost of new page-cache pages, which inflates PLAINTEXT and
            # TLS alike and so flatters the ratio (see docs/benchmarks.md, Security).
            warm_gb = args.warm_gb if args.warm_gb >= 0 else 1.5 * 3 * count * size / 1e9
            for round_ in range(args.rounds):
                for index, (broker, bootstraps) in enumerate(brokers):
                    if warm_gb:
                        warm_memory(Path(scratch), warm_gb)
                    results[index].append(
                        throughput_round(broker, bootstraps, pki, count, size, f"-{index}-{round_}")
                    )
            setups = []
            bootstraps = brokers[0][1]
            for kind in ("PLAINTEXT", "SSL", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                listener = "SASL_SSL" if kind.startswith("SCRAM") else kind
                setups.append(
                    (kind, *setup_times(connector(bootstraps[listener], pki, kind), connections))
                )
        finally:
            for broker, _ in brokers:
                broker.stop()
    print(
        f"{count:,} messages of {size} B per listener, acks=1; broker CPU s/GB = its utime+stime; "
        f"median of {args.rounds} round(s)\n"
    )
    print(
        "| code | listener | produce MB/s | broker CPU s/GB | x PLAINTEXT "
        "| fetch MB/s | broker CPU s/GB | x PLAINTEXT |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for index, (code, _) in enumerate(trees):
        rounds = results[index]
        medians = {
            listener: [statistics.median(r[i][column] for r in rounds) for column in range(1, 5)]
            for i, listener in enumerate(("PLAINTEXT", "SSL", "SASL_SSL"))
        }
        plain = medians["PLAINTEXT"]
        for listener, (produce_mbs, produce_cpu, fetch_mbs, fetch_cpu) in medians.items():
            print(
                f"| {code} | {listener} | {produce_mbs:,.1f} | {produce_cpu:.2f} "
                f"| {produce_cpu / plain[1]:.2f} | {fetch_mbs:,.1f} | {fetch_cpu:.2f} "
                f"| {fetch_cpu / plain[3]:.2f} |"
            )
    print(f"\nConnection set-up to the first answer, {connections} connections each:\n")
    print("| connection | p50 ms | p99 ms |")
    print("| --- | ---: | ---: |")
    names = {
        "PLAINTEXT": "PLAINTEXT: connect + ApiVersions (baseline)",
        "SSL": "SSL: connect + TLS handshake (client certificate) + ApiVersions",
        "SCRAM-SHA-256": "SASL_SSL: connect + TLS + SCRAM-SHA-256 + ApiVersions",
        "SCRAM-SHA-512": "SASL_SSL: connect + TLS + SCRAM-SHA-512 + ApiVersions",
    }
    for kind, p50, p99 in setups:
        print(f"| {names[kind]} | {p50:.2f} | {p99:.2f} |")


if __name__ == "__main__":
    main()
