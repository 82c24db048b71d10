"""Log compaction through a real ``josefk serve``: real clients produce keyed records (values
and tombstones) to a compacted topic, the cleaner runs, a fresh consumer reads exactly the
latest record per key; keyless records are refused with INVALID_RECORD; a policy changed at
run time takes effect; the broker is SIGKILLed at each step of a cleaning and loses nothing;
``__consumer_offsets`` is compacted too and the committed offsets survive a restart.

Waiting for the cleaner means polling ``cleaner-offset-checkpoint`` (the cleaner writes it
after every cleaning) until it covers the records of interest, with a deadline.
"""

from __future__ import annotations

import random
import time
import urllib.request
from pathlib import Path

import pytest
from broker_process import BrokerFactory, BrokerProcess, free_port
from client_helpers import CLIENT_TIMEOUT_S, ck_admin, ck_config, ck_create_topic, unique_topic
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from josefk.storage.log_cleaner import CLEANER_CHECKPOINT, CRASH_POINT_ENV

pytestmark = pytest.mark.timeout(240)

CLEANER_SETTINGS = ("log.cleaner.backoff.ms=100",)
COMPACT_TOPIC = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "min.cleanable.dirty.ratio": "0.01",
}
# Batches well under segment.bytes: a batch larger than a segment is refused.
BATCH_BYTES = 1500
Latest = dict[bytes, tuple[int, bytes | None]]


def workload(count: int, keys: int, seed: int) -> list[tuple[bytes, bytes | None]]:
    """Keyed records, about one in eight a tombstone."""
    rnd = random.Random(seed)
    out: list[tuple[bytes, bytes | None]] = []
    for i in range(count):
        key = f"key-{rnd.randrange(keys):03d}".encode()
        out.append((key, None if rnd.random() < 0.125 else f"value-{i}-{'x' * 20}".encode()))
    return out


def confluent_produce(
    bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]
) -> Latest:
    """Produce in order (idempotent, acks=all); returns key -> (offset, value) of the latest."""
    producer = Producer(
        ck_config(
            bootstrap, acks="all", enable_idempotence=True, linger_ms=5, batch_size=BATCH_BYTES
        )
    )
    acked: dict[int, tuple[bytes, bytes | None]] = {}
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(err)
        else:
            acked[msg.offset()] = (msg.key(), msg.value())

    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=report)
        producer.poll(0)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    assert not errors, errors
    return latest_of(acked)


def kafka_python_produce(
    bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]
) -> Latest:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, batch_size=BATCH_BYTES
    )
    try:
        futures = [producer.send(topic, key=k, value=v, partition=0) for k, v in records]
        producer.flush(CLIENT_TIMEOUT_S)
        acked = {}
        for (key, value), future in zip(records, futures, strict=True):
            acked[future.get(CLIENT_TIMEOUT_S).offset] = (key, value)
    finally:
        producer.close(CLIENT_TIMEOUT_S)
    return latest_of(acked)


def latest_of(acked: dict[int, tuple[bytes, bytes | None]]) -> Latest:
    latest: Latest = {}
    for offset in sorted(acked):
        key, value = acked[offset]
        latest[key] = (offset, value)
    return latest


def roll_past(bootstrap: str, topic: str, count: int = 40) -> int:
    """Produce ``count`` records with keys of their own, one request each, so the segments
    holding everything before roll and become cleanable; returns the first filler offset."""
    producer = Producer(ck_config(bootstrap, acks="all", linger_ms=0))
    offsets: list[int] = []
    for i in range(count):
        producer.produce(
            topic,
            key=f"filler-{i}".encode(),
            value=b"f" * 100,
            partition=0,
            on_delivery=lambda err, msg: offsets.append(msg.offset()) if err is None else None,
        )
        producer.flush(CLIENT_TIMEOUT_S)
    assert len(offsets) == count
    return min(offsets)


def checkpoint_of(data_dir: Path, topic: str, partition: int = 0) -> int | None:
    try:
        lines = (data_dir / CLEANER_CHECKPOINT).read_text().splitlines()[2:]
    except FileNotFoundError:
        return None
    for line in lines:
        name, number, offset = line.split(" ")
        if name == topic and int(number) == partition:
            return int(offset)
    return None


def wait_cleaned(broker: BrokerProcess, topic: str, through: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        checkpoint = checkpoint_of(broker.data_dir, topic)
        if checkpoint is not None and checkpoint > through:
            return
        assert broker.is_alive(), broker.stderr_tail()
        time.sleep(0.1)
    raise AssertionError(
        f"{topic} not cleaned through offset {through} within {timeout:.0f}s "
        f"(checkpoint {checkpoint_of(broker.data_dir, topic)})"
    )


def consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of partition 0 from the beginning, read by a fresh consumer."""
    consumer = Consumer(
        ck_config(
            bootstrap,
            **{
                "group.id": unique_topic("compaction-reader"),
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "check.crcs": True,
                "fetch.wait.max.ms": 100,
            },
        )
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return got
                raise KafkaException(err)
            got.append((msg.offset(), msg.key(), msg.value()))
        raise AssertionError(f"no end of {topic} within {CLIENT_TIMEOUT_S}s")
    finally:
        consumer.close()


def assert_exactly_latest(
    records: list[tuple[int, bytes | None, bytes | None]], latest: Latest, first_filler: int
) -> None:
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets))
    cleaned = [(offset, key, value) for offset, key, value in records if offset < first_filler]
    assert {key: (offset, value) for offset, key, value in cleaned} == latest
    assert len(cleaned) == len(latest), "a key appears more than once after cleaning"


@pytest.fixture
def compacting_broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(settings=CLEANER_SETTINGS)


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_a_fresh_consumer_reads_exactly_the_latest_record_per_key(
    compacting_broker: BrokerProcess, client: str
) -> None:
    broker = compacting_broker
    topic = unique_topic("compacted")
    ck_create_topic(broker.bootstrap, topic, config=COMPACT_TOPIC)
    produce = confluent_produce if client == "confluent-kafka" else kafka_python_produce
    latest = produce(broker.bootstrap, topic, workload(1500, 60, seed=1))
    first_filler = roll_past(broker.bootstrap, topic)
    wait_cleaned(broker, topic, through=first_filler - 1)
    records = consume_all(broker.bootstrap, topic)
    assert len(records) < 1500 / 2
    assert_exactly_latest(records, latest, first_filler)


def test_keyless_records_are_refused_with_invalid_record(compacting_broker: BrokerProcess) -> None:
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    broker = compacting_broker
    topic = unique_topic("compacted-keyless")
    ck_create_topic(broker.bootstrap, topic, config=COMPACT_TOPIC)
    producer = Producer(ck_config(broker.bootstrap, acks="all", linger_ms=0))
    reports: list[tuple[KafkaError | None, int]] = []

    def report(err: KafkaError | None, msg) -> None:  # type: ignore[no-untyped-def]
        reports.append((err, msg.offset()))

    producer.produce(topic, value=b"no key", partition=0, on_delivery=report)
    producer.flush(CLIENT_TIMEOUT_S)
    producer.produce(topic, key=b"k", value=b"with key", partition=0, on_delivery=report)
    producer.flush(CLIENT_TIMEOUT_S)
    assert reports[0][0] is not None and reports[0][0].code() == KafkaError.INVALID_RECORD
    assert reports[1] == (None, 0)  # nothing of the refused batch was appended

    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    try:
        with pytest.raises(InvalidRecordError):
            kp.send(topic, value=b"no key", partition=0).get(CLIENT_TIMEOUT_S)
        assert kp.send(topic, key=b"k", value=b"v", partition=0).get(CLIENT_TIMEOUT_S).offset == 1
    finally:
        kp.close(CLIENT_TIMEOUT_S)


def test_a_policy_changed_at_run_time_takes_effect(compacting_broker: BrokerProcess) -> None:
    broker = compacting_broker
    topic = unique_topic("becomes-compacted")
    ck_create_topic(
        broker.bootstrap,
        topic,
        config={"segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"},
    )
    latest = confluent_produce(broker.bootstrap, topic, workload(600, 20, seed=2))
    first_filler = roll_past(broker.bootstrap, topic)
    set_policy(broker, topic, "compact")
    wait_cleaned(broker, topic, through=first_filler - 1)
    assert_exactly_latest(consume_all(broker.bootstrap, topic), latest, first_filler)


def set_policy(broker: BrokerProcess, topic: str, policy: str) -> None:
    """IncrementalAlterConfigs: SET cleanup.policy."""
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", policy, incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin = ck_admin(broker.bootstrap)
    admin.incremental_alter_configs([resource])[resource].result(CLIENT_TIMEOUT_S)


def scrape(broker: BrokerProcess) -> str:
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=20) as response:
        return response.read().decode()


def test_cleaner_metrics_and_dump_log(tmp_path: Path) -> None:
    import subprocess
    import sys

    broker = BrokerProcess(
        tmp_path / "data",
        tmp_path / "metrics.stderr.log",
        settings=CLEANER_SETTINGS,
        metrics_port=free_port(),
    )
    try:
        broker.start()
        topic = unique_topic("compacted-metrics")
        ck_create_topic(broker.bootstrap, topic, config=COMPACT_TOPIC)
        confluent_produce(broker.bootstrap, topic, workload(400, 10, seed=3))
        first_filler = roll_past(broker.bootstrap, topic)
        wait_cleaned(broker, topic, through=first_filler - 1)
        text = scrape(broker)
        for name in (
            "kafka_log_logcleanermanager_max_dirty_percent",
            "kafka_log_logcleanermanager_time_since_last_run_ms",
            "kafka_log_logcleaner_cleaner_recopy_percent",
            "kafka_log_logcleaner_max_clean_time_secs",
            "kafka_log_logcleaner_max_buffer_utilization_percent",
        ):
            assert f"\n{name} " in text, name
        counters = {
            line.split()[0]: float(line.split()[-1])
            for line in text.splitlines()
            if line.startswith("josefk_log_cleaner_")
        }
        assert counters["josefk_log_cleaner_runs_total"] >= 1
        assert counters["josefk_log_cleaner_bytes_read_total"] > 0
        # The first cleaned segment that kept anything (the earliest ones may be empty now).
        first_segment = next(
            path
            for path in sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
            if path.stat().st_size
        )
        dumped = subprocess.run(
            [sys.executable, "-m", "josefk", "dump-log", "--print-records", str(first_segment)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "delete_horizon_ms:" in dumped and "key: key-" in dumped
    finally:
        if broker.is_alive():
            broker.stop()
        broker.close()


# -- crashes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "left_behind"),
    [
        ("writing-cleaned", "*.cleaned"),
        ("after-swap-rename", "*.swap"),
        ("during-swap", "*.deleted"),
    ],
)
def test_a_sigkill_at_any_step_of_cleaning_loses_and_duplicates_nothing(
    broker_factory: BrokerFactory,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
    left_behind: str,
) -> None:
    monkeypatch.setenv(CRASH_POINT_ENV, step)
    broker = broker_factory(settings=CLEANER_SETTINGS)
    topic = unique_topic(f"crash-{step}")
    # Not compacted while the records go in: the crash must come after every ack.
    ck_create_topic(broker.bootstrap, topic, config={**COMPACT_TOPIC, "cleanup.policy": "delete"})
    sent = workload(1200, 50, seed=4)
    latest = confluent_produce(broker.bootstrap, topic, sent)
    first_filler = roll_past(broker.bootstrap, topic)
    set_policy(broker, topic, "compact")
    # The cleaner kills the broker at the step.
    assert broker.wait_exit(timeout=60) == -9
    partition_dir = broker.data_dir / f"{topic}-0"
    assert list(partition_dir.glob(left_behind)), sorted(p.name for p in partition_dir.iterdir())
    monkeypatch.delenv(CRASH_POINT_ENV)
    restarted_ns = time.time_ns()
    broker.restart()
    # The crash's leftovers are gone. The cleaner (100 ms backoff) may already be writing
    # new `.cleaned` files of the same names once the broker is up: those are younger than
    # the restart, the leftovers older.
    assert not [
        path.name
        for pattern in ("*.cleaned", "*.swap")
        for path in partition_dir.glob(pattern)
        if _modified_before(path, restarted_ns)
    ]
    records = consume_all(broker.bootstrap, topic)
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)), "an offset twice"
    read_latest = {key: (offset, value) for offset, key, value in records if offset < first_filler}
    assert read_latest == latest, "a key's latest record lost"
    # And the next cleaning, uninterrupted, finishes the job.
    wait_cleaned(broker, topic, through=first_filler - 1)
    assert_exactly_latest(consume_all(broker.bootstrap, topic), latest, first_filler)


def _modified_before(path: Path, when_ns: int) -> bool:
    try:
        return path.stat().st_mtime_ns < when_ns
    except FileNotFoundError:
        return False  # swapped in or deleted by the cleaner meanwhile


# -- __consumer_offsets ---------------------------------------------------------------------------


def test_consumer_offsets_are_compacted_and_survive_a_restart(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(
        settings=(
            *CLEANER_SETTINGS,
            "offsets.topic.num.partitions=1",
            "offsets.topic.segment.bytes=4096",
        )
    )
    topic = unique_topic("committed")
    ck_create_topic(broker.bootstrap, topic, partitions=4)
    groups = [unique_topic("group") for _ in range(3)]
    expected: dict[tuple[str, int], int] = {}
    consumers = {
        group: Consumer(
            ck_config(broker.bootstrap, **{"group.id": group, "enable.auto.commit": False})
        )
        for group in groups
    }
    try:
        for round_ in range(150):
            for group, consumer in consumers.items():
                partition = round_ % 4
                consumer.commit(
                    offsets=[TopicPartition(topic, partition, round_)], asynchronous=False
                )
                expected[(group, partition)] = round_
    finally:
        for consumer in consumers.values():
            consumer.close()
    wait_cleaned_any(broker, "__consumer_offsets", through=400)
    broker.stop()
    # 450 commits; what is left is one record per (group, partition) plus the group
    # records, and the commits of the active segment, which is never cleaned.
    kept = records_in(broker.data_dir / "__consumer_offsets-0")
    assert kept < 450 / 3, kept
    broker.start()
    for group in groups:
        consumer = Consumer(ck_config(broker.bootstrap, **{"group.id": group}))
        try:
            committed = consumer.committed(
                [TopicPartition(topic, p) for p in range(4)], timeout=CLIENT_TIMEOUT_S
            )
        finally:
            consumer.close()
        assert {(group, tp.partition): tp.offset for tp in committed} == {
            key: value for key, value in expected.items() if key[0] == group
        }


def wait_cleaned_any(
    broker: BrokerProcess, topic: str, *, through: int, timeout: float = 60.0
) -> None:
    deadline = time.monotonic() + timeout
    while (checkpoint_of(broker.data_dir, topic) or 0) <= through:
        assert time.monotonic() < deadline, f"{topic} not cleaned through {through}"
        time.sleep(0.1)


def records_in(partition_dir: Path) -> int:
    from josefk.records import split_batches

    return sum(
        batch.record_count
        for path in partition_dir.glob("*.log")
        for batch in split_batches(path.read_bytes())
    )
