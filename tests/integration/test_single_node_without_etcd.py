"""A single-node broker never loads the etcd client (issue 29, section 3).

The cluster's metadata types (partition state, topic record) and errors live in pure
modules of josefk.cluster; only a cluster broker imports the etcd client. Checked on a real
``josefk serve`` run with Python's import-time log (``PYTHONPROFILEIMPORTTIME``: one stderr
line per module imported, whenever it is imported): after start-up and a round of topic
administration (create, configs, partitions, auto-creation by Metadata, delete), which
exercises the handlers' lazily-taken paths too, no ``aetcd`` (nor grpc) module was imported.
"""

from __future__ import annotations

import re
from pathlib import Path

from confluent_kafka import Producer

from tests.integration.broker_process import BrokerProcess, run_josefk, start_or_close, stop_broker

_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(?P<module>\S+)\s*$")


def _imported_modules(log: Path) -> set[str]:
    return {
        m["module"]
        for line in log.read_text(errors="replace").splitlines()
        if (m := _IMPORTED.match(line)) is not None
    }


def test_a_single_node_serves_topic_admin_without_the_etcd_client(tmp_path: Path) -> None:
    log = tmp_path / "broker.stderr.log"
    broker = start_or_close(
        BrokerProcess(
            tmp_path / "data",
            log,
            settings=["auto.create.topics.enable=true"],
            command_prefix=["env", "PYTHONPROFILEIMPORTTIME=1"],
        )
    )
    try:
        bootstrap = broker.bootstrap
        run_josefk(bootstrap, "topics", "create", "admin-t", "-p", "2")
        run_josefk(
            bootstrap, "configs", "alter", "--topic", "admin-t", "--add-config", "retention.ms=1000"
        )
        run_josefk(bootstrap, "topics", "alter", "admin-t", "--partitions", "3")
        # Metadata auto-creates a topic a producer names.
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("auto-made", b"x")
        assert producer.flush(30) == 0
        del producer
        assert "auto-made" in run_josefk(bootstrap, "topics", "list")
        run_josefk(bootstrap, "topics", "delete", "admin-t")
        stop_broker(broker)
    finally:
        broker.close()
    modules = _imported_modules(log)
    # The log is read: the broker's own modules are in it. (Modules importlib loads by name,
    # as the handler registry does, are not logged themselves, but every import statement
    # they run is: an etcd client they pulled in would show.)
    assert {"josefk.broker.server", "josefk.broker.topic_admin"} <= modules
    loaded = sorted(m for m in modules if m.split(".")[0] in ("aetcd", "grpc"))
    assert loaded == []
    assert "josefk.broker.cluster_node" not in modules
