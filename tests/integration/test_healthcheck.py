"""``python -m josefk.healthcheck``, the container image's HEALTHCHECK, against a real broker,
against nothing, and against a listener that is not a broker."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

from broker_process import BrokerProcess, free_port

from josefk.healthcheck import check, target


def healthcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "josefk.healthcheck", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )


def test_a_serving_broker_is_healthy(broker: BrokerProcess) -> None:
    done = healthcheck(broker.bootstrap)
    assert done.returncode == 0, done.stderr


def test_nothing_listening_is_unhealthy() -> None:
    done = healthcheck(f"127.0.0.1:{free_port()}")
    assert done.returncode == 1
    assert done.stderr.startswith("unhealthy: 127.0.0.1:")


def test_a_listener_that_is_not_a_broker_is_unhealthy() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def answer_nonsense() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(100)
                conn.sendall(b"-ERR unknown command\r\n")

        thread = threading.Thread(target=answer_nonsense, daemon=True)
        thread.start()
        done = healthcheck(f"127.0.0.1:{server.getsockname()[1]}")
        thread.join(timeout=10)
    assert done.returncode == 1
    assert "unhealthy" in done.stderr


def test_the_address_comes_from_the_argument_or_the_containers_listeners() -> None:
    assert target(["broker1:9092"], {}) == ("broker1", 9092)
    assert target([], {}) == ("127.0.0.1", 9092)
    listeners = "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:19092"
    assert target([], {"JOSEFK_LISTENERS": listeners}) == ("127.0.0.1", 29092)
    assert target([], {"JOSEFK_LISTENERS": "PLAINTEXT://[::]:9093"}) == ("127.0.0.1", 9093)
    assert target([], {"JOSEFK_LISTENERS": "PLAINTEXT://10.0.0.5:9094"}) == ("10.0.0.5", 9094)


def test_a_cluster_broker_is_healthy_only_when_it_lists_itself(broker: BrokerProcess) -> None:
    """The single node is broker 1 in its own Metadata; a broker 7 is not (as a cluster broker
    that has not registered yet, or is fenced, is not)."""
    host, port = broker.bootstrap.rsplit(":", 1)
    assert check(host, int(port), node_id=1) is None
    assert check(host, int(port), node_id=7) == "broker 7 is not registered in the cluster (yet)"
    env = {"JOSEFK_ETCD_ENDPOINTS": "etcd:2379", "JOSEFK_NODE_ID": "7"}
    done = healthcheck(broker.bootstrap, env={**os.environ, **env})
    assert done.returncode == 1 and "broker 7" in done.stderr
