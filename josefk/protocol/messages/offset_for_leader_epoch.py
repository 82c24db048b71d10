"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch, which followers and
consumers use to find where their log diverges from the leader's after a leader change.

KIP-101 introduced it, KIP-279 (v1) returns the epoch the end offset belongs to, KIP-320 (v2)
adds the caller's current leader epoch for fencing and the throttle time, KIP-392 (v3) adds
the replica id (-2 for a consumer), v4 is flexible. KIP-896 removed v0-1 in Kafka 4.0.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=23,
    name="OffsetForLeaderEpoch",
    valid="2-4",
    flexible="4+",
    fields=[
        # -2 is the "debug consumer" id, allowed to see offsets past the high watermark.
        field("replica_id", "int32", "3+", default=-2, ignorable=True),
        array(
            "topics",
            "OffsetForLeaderTopic",
            "2+",
            [
                field("topic", "string", "2+"),
                array(
                    "partitions",
                    "OffsetForLeaderPartition",
                    "2+",
                    [
                        field("partition", "int32", "2+"),
                        field("current_leader_epoch", "int32", "2+", default=-1, ignorable=True),
                        field("leader_epoch", "int32", "2+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=23,
    name="OffsetForLeaderEpoch",
    valid="2-4",
    flexible="4+",
    fields=[
        field("throttle_time_ms", "int32", "2+", ignorable=True),
        array(
            "topics",
            "OffsetForLeaderTopicResult",
            "2+",
            [
                field("topic", "string", "2+"),
                array(
                    "partitions",
                    "EpochEndOffset",
                    "2+",
                    [
                        field("error_code", "int16", "2+"),
                        field("partition", "int32", "2+"),
                        field("leader_epoch", "int32", "2+", default=-1, ignorable=True),
                        field("end_offset", "int64", "2+", default=-1),
                    ],
                ),
            ],
        ),
    ],
)
