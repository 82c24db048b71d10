"""ListOffsets (key 2): offsets by timestamp, earliest (-2), latest (-1), max timestamp (-3,
v7, KIP-734), earliest local (-4, v8, KIP-405) and latest tiered (-5, v9, KIP-1005).

Versions 1-10 (v0 was removed in Kafka 4.0), flexible from 6. v2 adds the isolation level,
v4 the current leader epoch (fencing) and the leader epoch in the response, v10 the timeout
for reads from remote storage (KIP-1075).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=2,
    name="ListOffsets",
    valid="1-10",
    flexible="6+",
    fields=[
        field("replica_id", "int32", "0+"),
        field("isolation_level", "int8", "2+"),
        array(
            "topics",
            "ListOffsetsTopic",
            "0+",
            [
                field("name", "string", "0+"),
                array(
                    "partitions",
                    "ListOffsetsPartition",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("current_leader_epoch", "int32", "4+", default=-1, ignorable=True),
                        field("timestamp", "int64", "0+"),
                    ],
                ),
            ],
        ),
        field("timeout_ms", "int32", "10+", ignorable=True),
    ],
)

RESPONSE = response(
    api_key=2,
    name="ListOffsets",
    valid="1-10",
    flexible="6+",
    fields=[
        field("throttle_time_ms", "int32", "2+", ignorable=True),
        array(
            "topics",
            "ListOffsetsTopicResponse",
            "0+",
            [
                field("name", "string", "0+"),
                array(
                    "partitions",
                    "ListOffsetsPartitionResponse",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("error_code", "int16", "0+"),
                        field("timestamp", "int64", "1+", default=-1),
                        field("offset", "int64", "1+", default=-1),
                        field("leader_epoch", "int32", "4+", default=-1),
                    ],
                ),
            ],
        ),
    ],
)
