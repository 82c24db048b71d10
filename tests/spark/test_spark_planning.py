"""Option parsing and offset planning of the Spark data source, without Spark or a broker.

josefk.spark.options and josefk.spark.planning are pure Python (no pyspark import), so these
run everywhere. Invariants of ``split_ranges`` and ``rate_limit`` are checked with hypothesis.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.client import ConsumerConfig, ProducerConfig
from josefk.spark.options import (
    EARLIEST,
    LATEST,
    OptionError,
    SinkOptions,
    SourceOptions,
    client_settings,
    offsets_from_json,
    offsets_to_json,
    parse_offsets_json,
)
from josefk.spark.planning import OffsetRange, rate_limit, split_ranges

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_subscribe_and_defaults() -> None:
    batch = SourceOptions.parse({**BOOT, "subscribe": "a, b"}, streaming=False)
    assert batch.subscription.topics == ("a", "b")
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"
    assert batch.fail_on_data_loss and not batch.include_headers
    stream = SourceOptions.parse({**BOOT, "subscribe": "a"}, streaming=True)
    assert stream.starting.kind == "latest"


def test_option_names_are_case_insensitive_and_bootstrap_has_two_spellings() -> None:
    opts = SourceOptions.parse(
        {
            "bootstrap.servers": "h:1",
            "SubscribePattern": "ev-.*",
            "MAXOFFSETSPERTRIGGER": "10",
            "minPartitions": "4",
            "includeHeaders": "true",
            "failOnDataLoss": "false",
        },
        streaming=True,
    )
    assert opts.consumer_settings["bootstrap_servers"] == "h:1"
    assert opts.subscription.matches("ev-1") and not opts.subscription.matches("xev-1")
    assert opts.max_offsets_per_trigger == 10 and opts.min_partitions == 4
    assert opts.include_headers and not opts.fail_on_data_loss


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"subscribe": "a", "assign": '{"a": [0]}'},
        {"subscribe": ""},
        {"subscribePattern": "("},
        {"assign": "[1, 2]"},
        {"subscribe": "a", "startingOffsets": "latest"},
        {"subscribe": "a", "endingOffsets": "earliest"},
        {"subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'},
        {"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'},
        {"subscribe": "a", "startingOffsets": "{nope"},
        {"subscribe": "a", "minPartitions": "0"},
        {"subscribe": "a", "failOnDataLoss": "maybe"},
    ],
)
def test_bad_batch_options_are_rejected(options: dict[str, str]) -> None:
    with pytest.raises(OptionError):
        SourceOptions.parse({**BOOT, **options}, streaming=False)


def test_streaming_rejects_ending_offsets_and_needs_bootstrap() -> None:
    with pytest.raises(OptionError, match="endingOffsets"):
        SourceOptions.parse({**BOOT, "subscribe": "a", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(OptionError, match="bootstrap"):
        SourceOptions.parse({"subscribe": "a"}, streaming=True)


def test_starting_timestamp_and_json_offsets() -> None:
    opts = SourceOptions.parse(
        {**BOOT, "assign": '{"t": [1, 0]}', "startingTimestamp": "1700000000000"},
        streaming=True,
    )
    assert opts.subscription.assign == (("t", 0), ("t", 1))
    assert opts.starting.kind == "timestamp" and opts.starting.timestamp_ms == 1700000000000
    parsed = parse_offsets_json("x", '{"t": {"0": 5, "1": -2}, "u": {"3": -1}}')
    assert parsed == {("t", 0): 5, ("t", 1): EARLIEST, ("u", 3): LATEST}
    assert offsets_from_json(offsets_to_json(parsed)) == parsed
    assert offsets_to_json(parsed) == {"t": {"0": 5, "1": -2}, "u": {"3": -1}}


def test_kafka_prefixed_settings_pass_through_typed() -> None:
    settings = client_settings(
        {
            **BOOT,
            "kafka.max.partition.fetch.bytes": "4194304",
            "kafka.client.id": "spark",
            "kafka.group.id": "ignored",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": 'x.ScramLoginModule required username="u" password="p";',
            "kafka.sasl.kerberos.service.name": "kafka",
            "subscribe": "not-a-client-setting",
        },
        ConsumerConfig,
    )
    assert settings == {
        "bootstrap_servers": "127.0.0.1:9092",
        "max_partition_fetch_bytes": 4194304,
        "client_id": "spark",
        # Spark's Kafka source takes its security settings this way; so does josefk's.
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_jaas_config": 'x.ScramLoginModule required username="u" password="p";',
    }
    producer = client_settings({**BOOT, "kafka.linger.ms": "20", "kafka.acks": "1"}, ProducerConfig)
    assert producer["linger_ms"] == 20.0 and producer["acks"] == "1"
    with pytest.raises(OptionError):
        client_settings({**BOOT, "kafka.request.timeout.ms": "soon"}, ConsumerConfig)


def test_sink_topic_option() -> None:
    assert SinkOptions.parse({**BOOT, "topic": "out"}).topic == "out"
    assert SinkOptions.parse(BOOT).topic is None


def test_split_ranges_examples() -> None:
    ranges = [OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 5, 15), OffsetRange("t", 2, 7, 7)]
    assert split_ranges(ranges, None) == ranges[:2]
    assert split_ranges(ranges, 2) == ranges[:2]
    split = split_ranges(ranges, 4)
    assert [r.partition for r in split] == [0, 0, 0, 0, 1]
    assert [r.size for r in split] == [22, 23, 22, 23, 10]


range_lists = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 10_000), st.integers(0, 10_000)).map(
        lambda t: OffsetRange("t", t[0], min(t[1], t[2]), max(t[1], t[2]))
    ),
    max_size=6,
)


@given(range_lists, st.one_of(st.none(), st.integers(1, 64)))
def test_split_ranges_cover_each_range_exactly(
    ranges: list[OffsetRange], min_partitions: int | None
) -> None:
    split = split_ranges(ranges, min_partitions)
    live = [r for r in ranges if r.size]
    # Consecutive pieces of each input range, in order, with no gaps or overlaps.
    pieces = iter(split)
    for r in live:
        offset = r.from_offset
        while offset < r.until_offset:
            piece = next(pieces)
            assert (piece.topic, piece.partition, piece.from_offset) == (
                r.topic,
                r.partition,
                offset,
            )
            assert piece.size > 0
            offset = piece.until_offset
        assert offset == r.until_offset
    assert next(pieces, None) is None
    if min_partitions is not None:
        assert len(split) >= min(min_partitions, sum(r.size for r in live))


lag_maps = st.dictionaries(
    st.tuples(st.sampled_from("ab"), st.integers(0, 4)),
    st.tuples(st.integers(0, 1_000), st.integers(0, 1_000)),
    max_size=8,
)


@given(lag_maps, st.integers(1, 3_000))
def test_rate_limit_spends_exactly_the_budget_within_the_lag(
    spans: dict[tuple[str, int], tuple[int, int]], budget: int
) -> None:
    start = {tp: lo for tp, (lo, _) in spans.items()}
    latest = {tp: lo + extra for tp, (lo, extra) in spans.items()}
    end = rate_limit(start, latest, budget)
    assert set(end) == set(latest)
    for tp in latest:
        assert start[tp] <= end[tp] <= latest[tp]
    total_lag = sum(latest[tp] - start[tp] for tp in latest)
    assert sum(end[tp] - start[tp] for tp in latest) == min(budget, total_lag)


def test_rate_limit_shares_in_proportion_to_lag() -> None:
    start = {("t", 0): 0, ("t", 1): 100}
    latest = {("t", 0): 300, ("t", 1): 200}
    assert rate_limit(start, latest, 40) == {("t", 0): 30, ("t", 1): 110}
    assert rate_limit(start, latest, 1_000) == latest
