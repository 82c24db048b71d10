"""Fetch (key 1): read record data from partitions.

Versions 4-17 (Kafka 4.0 accepts 4+), flexible from 12. v4 adds isolation level and aborted
transactions, v5 log start offsets, v7 incremental fetch sessions (KIP-227), v9 the current
leader epoch (KIP-320), v11 rack id and preferred read replica (KIP-392), v12 the last
fetched epoch, diverging epoch, current leader and snapshot id (KIP-595) and the cluster id
tag, v13 topic ids instead of names (KIP-516), v15 the replica state tag replacing the
replica id (KIP-903), v16 node endpoints (KIP-951), v17 the replica directory id (KIP-853).
Record data is an opaque memoryview on decode; on encode the broker may put a file slice in
``records`` and use ``encode_response_parts`` to send it with sendfile.
"""

from josefk.protocol.schema import array, field, request, response, struct

REQUEST = request(
    api_key=1,
    name="Fetch",
    valid="4-17",
    flexible="12+",
    fields=[
        field(
            "cluster_id",
            "string",
            "12+",
            nullable="12+",
            default=None,
            tag=0,
            tagged="12+",
            ignorable=True,
        ),
        field("replica_id", "int32", "0-14", default=-1),
        struct(
            "replica_state",
            "ReplicaState",
            "15+",
            [
                field("replica_id", "int32", "15+", default=-1),
                field("replica_epoch", "int64", "15+", default=-1),
            ],
            tag=1,
            tagged="15+",
        ),
        field("max_wait_ms", "int32", "0+"),
        field("min_bytes", "int32", "0+"),
        field("max_bytes", "int32", "3+", default=0x7FFFFFFF, ignorable=True),
        field("isolation_level", "int8", "4+", default=0, ignorable=True),
        field("session_id", "int32", "7+", default=0, ignorable=True),
        field("session_epoch", "int32", "7+", default=-1, ignorable=True),
        array(
            "topics",
            "FetchTopic",
            "0+",
            [
                field("topic", "string", "0-12", ignorable=True),
                field("topic_id", "uuid", "13+", ignorable=True),
                array(
                    "partitions",
                    "FetchPartition",
                    "0+",
                    [
                        field("partition", "int32", "0+"),
                        field("current_leader_epoch", "int32", "9+", default=-1, ignorable=True),
                        field("fetch_offset", "int64", "0+"),
                        field("last_fetched_epoch", "int32", "12+", default=-1, ignorable=False),
                        field("log_start_offset", "int64", "5+", default=-1, ignorable=True),
                        field("partition_max_bytes", "int32", "0+"),
                        field(
                            "replica_directory_id",
                            "uuid",
                            "17+",
                            tag=0,
                            tagged="17+",
                            ignorable=True,
                        ),
                    ],
                ),
            ],
        ),
        array(
            "forgotten_topics_data",
            "ForgottenTopic",
            "7+",
            [
                field("topic", "string", "7-12", ignorable=True),
                field("topic_id", "uuid", "13+", ignorable=True),
                field("partitions", "[]int32", "7+"),
            ],
            ignorable=False,
        ),
        field("rack_id", "string", "11+", default="", ignorable=True),
    ],
)

RESPONSE = response(
    api_key=1,
    name="Fetch",
    valid="4-17",
    flexible="12+",
    fields=[
        field("throttle_time_ms", "int32", "1+", default=0, ignorable=True),
        field("error_code", "int16", "7+", default=0, ignorable=True),
        field("session_id", "int32", "7+", default=0, ignorable=False),
        array(
            "responses",
            "FetchableTopicResponse",
            "0+",
            [
                field("topic", "string", "0-12", ignorable=True),
                field("topic_id", "uuid", "13+", ignorable=True),
                array(
                    "partitions",
                    "PartitionData",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("error_code", "int16", "0+"),
                        field("high_watermark", "int64", "0+"),
                        field("last_stable_offset", "int64", "4+", default=-1, ignorable=True),
                        field("log_start_offset", "int64", "5+", default=-1, ignorable=True),
                        struct(
                            "diverging_epoch",
                            "EpochEndOffset",
                            "12+",
                            [
                                field("epoch", "int32", "12+", default=-1),
                                field("end_offset", "int64", "12+", default=-1),
                            ],
                            tag=0,
                            tagged="12+",
                        ),
                        struct(
                            "current_leader",
                            "LeaderIdAndEpoch",
                            "12+",
                            [
                                field("leader_id", "int32", "12+", default=-1),
                                field("leader_epoch", "int32", "12+", default=-1),
                            ],
                            tag=1,
                            tagged="12+",
                        ),
                        struct(
                            "snapshot_id",
                            "SnapshotId",
                            "12+",
                            [
                                field("end_offset", "int64", "12+", default=-1),
                                field("epoch", "int32", "12+", default=-1),
                            ],
                            tag=2,
                            tagged="12+",
                        ),
                        array(
                            "aborted_transactions",
                            "AbortedTransaction",
                            "4+",
                            [
                                field("producer_id", "int64", "4+"),
                                field("first_offset", "int64", "4+"),
                            ],
                            nullable="4+",
                            ignorable=True,
                        ),
                        field(
                            "preferred_read_replica", "int32", "11+", default=-1, ignorable=False
                        ),
                        field("records", "records", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
        array(
            "node_endpoints",
            "NodeEndpoint",
            "16+",
            [
                field("node_id", "int32", "16+"),
                field("host", "string", "16+"),
                field("port", "int32", "16+"),
                field("rack", "string", "16+", nullable="16+", default=None),
            ],
            tag=0,
            tagged="16+",
        ),
    ],
)
