"""Produce (key 0): write record batches to partitions.

Versions 3-12 (Kafka 4.0 accepts 3+; magic 2 only), flexible from 9. v3 adds the
transactional id, v5 the log start offset in the response, v8 per-batch record errors
(KIP-467), v10 the current leader and node endpoints as tagged fields (KIP-951), v11/v12 are
the same wire format (KIP-890 bumps). Records stay an opaque memoryview.
"""

from josefk.protocol.schema import array, field, request, response, struct

REQUEST = request(
    api_key=0,
    name="Produce",
    valid="3-12",
    flexible="9+",
    fields=[
        field("transactional_id", "string", "3+", nullable="3+", default=None),
        field("acks", "int16", "0+"),
        field("timeout_ms", "int32", "0+"),
        array(
            "topic_data",
            "TopicProduceData",
            "0+",
            [
                field("name", "string", "0+", ignorable=True),
                array(
                    "partition_data",
                    "PartitionProduceData",
                    "0+",
                    [
                        field("index", "int32", "0+"),
                        field("records", "records", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=0,
    name="Produce",
    valid="3-12",
    flexible="9+",
    fields=[
        array(
            "responses",
            "TopicProduceResponse",
            "0+",
            [
                field("name", "string", "0+", ignorable=True),
                array(
                    "partition_responses",
                    "PartitionProduceResponse",
                    "0+",
                    [
                        field("index", "int32", "0+"),
                        field("error_code", "int16", "0+"),
                        field("base_offset", "int64", "0+"),
                        field("log_append_time_ms", "int64", "2+", default=-1, ignorable=True),
                        field("log_start_offset", "int64", "5+", default=-1, ignorable=True),
                        array(
                            "record_errors",
                            "BatchIndexAndErrorMessage",
                            "8+",
                            [
                                field("batch_index", "int32", "8+"),
                                field(
                                    "batch_index_error_message",
                                    "string",
                                    "8+",
                                    nullable="8+",
                                    default=None,
                                ),
                            ],
                            ignorable=True,
                        ),
                        field(
                            "error_message",
                            "string",
                            "8+",
                            nullable="8+",
                            default=None,
                            ignorable=True,
                        ),
                        struct(
                            "current_leader",
                            "LeaderIdAndEpoch",
                            "10+",
                            [
                                field("leader_id", "int32", "10+", default=-1),
                                field("leader_epoch", "int32", "10+", default=-1),
                            ],
                            tag=0,
                            tagged="10+",
                        ),
                    ],
                ),
            ],
        ),
        field("throttle_time_ms", "int32", "1+", default=0, ignorable=True),
        array(
            "node_endpoints",
            "NodeEndpoint",
            "10+",
            [
                field("node_id", "int32", "10+"),
                field("host", "string", "10+"),
                field("port", "int32", "10+"),
                field("rack", "string", "10+", nullable="10+", default=None),
            ],
            tag=0,
            tagged="10+",
        ),
    ],
)
