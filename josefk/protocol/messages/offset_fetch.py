"""OffsetFetch (key 9): read a group's committed offsets.

Kafka 4.0 starts at v1 (KIP-896). v2 allows a null topic list meaning "all topics" and adds a
top-level error, v5 the leader epoch (KIP-320), v6 is flexible (KIP-482), v7 adds require_stable
(KIP-447), v8 fetches several groups at once (KIP-709), v9 carries the member id and epoch of the
new consumer protocol (KIP-848) and v10 names topics by id.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=9,
    name="OffsetFetch",
    valid="1-10",
    flexible="6+",
    fields=[
        field("group_id", "string", "0-7"),
        array(
            "topics",
            "OffsetFetchRequestTopic",
            "0-7",
            [
                field("name", "string", "0-7"),
                field("partition_indexes", "[]int32", "0-7"),
            ],
            nullable="2-7",
        ),
        array(
            "groups",
            "OffsetFetchRequestGroup",
            "8+",
            [
                field("group_id", "string", "8+"),
                field("member_id", "string", "9+", nullable="9+", default=None, ignorable=True),
                field("member_epoch", "int32", "9+", default=-1, ignorable=True),
                array(
                    "topics",
                    "OffsetFetchRequestTopics",
                    "8+",
                    [
                        field("name", "string", "8-9", ignorable=True),
                        field("topic_id", "uuid", "10+", ignorable=True),
                        field("partition_indexes", "[]int32", "8+"),
                    ],
                    nullable="8+",
                ),
            ],
        ),
        field("require_stable", "bool", "7+", default=False),
    ],
)

RESPONSE = response(
    api_key=9,
    name="OffsetFetch",
    valid="1-10",
    flexible="6+",
    fields=[
        field("throttle_time_ms", "int32", "3+", ignorable=True),
        array(
            "topics",
            "OffsetFetchResponseTopic",
            "0-7",
            [
                field("name", "string", "0-7"),
                array(
                    "partitions",
                    "OffsetFetchResponsePartition",
                    "0-7",
                    [
                        field("partition_index", "int32", "0-7"),
                        field("committed_offset", "int64", "0-7"),
                        field("committed_leader_epoch", "int32", "5-7", default=-1, ignorable=True),
                        field("metadata", "string", "0-7", nullable="0-7"),
                        field("error_code", "int16", "0-7"),
                    ],
                ),
            ],
        ),
        field("error_code", "int16", "2-7", ignorable=True),
        array(
            "groups",
            "OffsetFetchResponseGroup",
            "8+",
            [
                field("group_id", "string", "8+"),
                array(
                    "topics",
                    "OffsetFetchResponseTopics",
                    "8+",
                    [
                        field("name", "string", "8-9", ignorable=True),
                        field("topic_id", "uuid", "10+", ignorable=True),
                        array(
                            "partitions",
                            "OffsetFetchResponsePartitions",
                            "8+",
                            [
                                field("partition_index", "int32", "8+"),
                                field("committed_offset", "int64", "8+"),
                                field(
                                    "committed_leader_epoch",
                                    "int32",
                                    "8+",
                                    default=-1,
                                    ignorable=True,
                                ),
                                field("metadata", "string", "8+", nullable="8+"),
                                field("error_code", "int16", "8+"),
                            ],
                        ),
                    ],
                ),
                field("error_code", "int16", "8+"),
            ],
        ),
    ],
)
