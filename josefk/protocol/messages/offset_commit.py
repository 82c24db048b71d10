"""OffsetCommit (key 8): a group member stores its consumed positions with the coordinator.

Versions 0-1 were dropped by KIP-896 (Kafka 4.0 starts at v2); v5 drops the retention time
(KIP-211), v6 adds the leader epoch (KIP-320), v7 static membership (KIP-345), v8 is
flexible (KIP-482), v9 serves the new consumer protocol (KIP-848) and v10 names topics by id.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=8,
    name="OffsetCommit",
    valid="2-10",
    flexible="8+",
    fields=[
        field("group_id", "string", "0+"),
        field("generation_id_or_member_epoch", "int32", "0+", default=-1, ignorable=True),
        field("member_id", "string", "0+", ignorable=True),
        field("group_instance_id", "string", "7+", nullable="7+", default=None),
        field("retention_time_ms", "int64", "2-4", default=-1, ignorable=True),
        array(
            "topics",
            "OffsetCommitRequestTopic",
            "0+",
            [
                field("name", "string", "0-9", ignorable=True),
                field("topic_id", "uuid", "10+", ignorable=True),
                array(
                    "partitions",
                    "OffsetCommitRequestPartition",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("committed_offset", "int64", "0+"),
                        field("committed_leader_epoch", "int32", "6+", default=-1, ignorable=True),
                        field("committed_metadata", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=8,
    name="OffsetCommit",
    valid="2-10",
    flexible="8+",
    fields=[
        field("throttle_time_ms", "int32", "3+", ignorable=True),
        array(
            "topics",
            "OffsetCommitResponseTopic",
            "0+",
            [
                field("name", "string", "0-9", ignorable=True),
                field("topic_id", "uuid", "10+", ignorable=True),
                array(
                    "partitions",
                    "OffsetCommitResponsePartition",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("error_code", "int16", "0+"),
                    ],
                ),
            ],
        ),
    ],
)
