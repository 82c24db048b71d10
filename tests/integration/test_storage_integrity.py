"""What the storage layer does with real clients' batches and with damaged files (issue 14).

Each test owns its broker: records without timestamps as librdkafka writes them, a topic
``compression.type`` that differs from the producer's codec, and a segment cut short while
the broker was stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from broker_process import BrokerFactory
from client_helpers import (
    assert_delivered,
    assert_same_messages,
    ck_consume,
    ck_create_topic,
    ck_produce,
    ck_watermarks,
    from_confluent,
    make_messages,
    unique_topic,
)

from josefk.records import NO_TIMESTAMP, split_batches

pytestmark = pytest.mark.timeout(180)


def stored_batches(data_dir: Path, topic: str) -> list[dict[str, object]]:
    """The batches of partition 0's segments as ``josefk dump-log --json`` reports them."""
    segments = sorted((data_dir / f"{topic}-0").glob("*.log"))
    result = subprocess.run(
        [sys.executable, "-m", "josefk", "dump-log", "--json", *map(str, segments)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    files = json.loads(result.stdout)["files"]
    return [batch for file in files for batch in file["batches"]]


def test_records_without_timestamps_are_stored_without_one(broker_factory: BrokerFactory) -> None:
    """librdkafka sends messages produced with timestamp -1 in a batch whose first timestamp
    is -1 and whose max timestamp field says 0; the broker stores -1 (no timestamp) instead,
    so that retention goes by the file's time and not by 1970."""
    broker = broker_factory()
    topic = unique_topic("no-ts")
    ck_create_topic(broker.bootstrap, topic)
    sent = make_messages(30, tag="nts", base_timestamp=NO_TIMESTAMP, timestamp_step=0)
    assert_delivered(ck_produce(broker.bootstrap, topic, sent, batch_num_messages=10))
    batches = stored_batches(broker.data_dir, topic)
    assert batches and all(b["crc_valid"] for b in batches)
    assert {b["create_time"] for b in batches} == {NO_TIMESTAMP}
    got = ck_consume(broker.bootstrap, topic, count=30)
    assert [m.timestamp()[1] for m in got] == [NO_TIMESTAMP] * 30
    assert [m.value() for m in got] == [m.value for m in sent]


@pytest.mark.parametrize(("topic_codec", "codec_name"), [("gzip", "gzip"), ("zstd", "zstd")])
def test_topic_compression_type_recompresses_the_producers_batches(
    broker_factory: BrokerFactory, topic_codec: str, codec_name: str
) -> None:
    broker = broker_factory()
    topic = unique_topic("codec")
    ck_create_topic(broker.bootstrap, topic, config={"compression.type": topic_codec})
    plain = unique_topic("plain")
    ck_create_topic(broker.bootstrap, plain)
    sent = make_messages(500, tag="cz", value_size=300)
    for name in (topic, plain):
        reports = ck_produce(
            broker.bootstrap, name, sent, compression_type="none", batch_num_messages=100
        )
        assert_delivered(reports)
        assert [r.offset for r in reports] == list(range(500))
    batches = stored_batches(broker.data_dir, topic)
    assert {b["compression_codec"] for b in batches} == {codec_name}
    assert all(b["crc_valid"] for b in batches)
    assert sum(int(str(b["count"])) for b in batches) == 500
    # The producer's own codec (none) on the topic that keeps it; the topic's is smaller.
    plain_batches = stored_batches(broker.data_dir, plain)
    assert {b["compression_codec"] for b in plain_batches} == {"none"}
    assert sum(int(str(b["size"])) for b in batches) < sum(
        int(str(b["size"])) for b in plain_batches
    )
    got = ck_consume(broker.bootstrap, topic, count=500)
    assert [m.offset() for m in got] == list(range(500))
    assert_same_messages([from_confluent(m) for m in got], sent)


def test_segment_cut_short_while_stopped_is_recovered(broker_factory: BrokerFactory) -> None:
    """After a clean shutdown, the only segment loses its second half (a disk or copy
    accident): the restarted broker serves the first half, with the right log end offset,
    and says so on stderr, naming the file."""
    broker = broker_factory()
    topic = unique_topic("cut")
    ck_create_topic(broker.bootstrap, topic)
    sent = make_messages(600, tag="cut", value_size=200)
    assert_delivered(ck_produce(broker.bootstrap, topic, sent, batch_num_messages=25))
    assert ck_watermarks(broker.bootstrap, topic) == (0, 600)
    broker.stop()
    segment = broker.data_dir / f"{topic}-0" / f"{0:020d}.log"
    assert sorted(p.name for p in segment.parent.glob("*.log")) == [segment.name]
    half = segment.stat().st_size // 2
    os.truncate(segment, half)
    # What survived whole: the batches that end within the first half.
    expected = 1 + max(b.last_offset for b in split_batches(segment.read_bytes()))
    assert 0 < expected < 600

    broker.start()
    assert ck_watermarks(broker.bootstrap, topic) == (0, expected)
    got = ck_consume(broker.bootstrap, topic, count=expected)
    assert_same_messages([from_confluent(m) for m in got], sent[:expected])
    stderr = broker.log_path.read_text(errors="replace")
    warnings = [line for line in stderr.splitlines() if "disagree" in line]
    assert any(str(segment) in line for line in warnings), stderr[-3000:]
    more = ck_produce(broker.bootstrap, topic, make_messages(2, tag="more"))
    assert [r.offset for r in more] == [expected, expected + 1]
