"""DescribeShareGroupOffsets (key 90, KIP-932): the share-partition start offsets of groups.

For each group, the topics and partitions asked for (all those with share state when the
topics are null), each with its share-partition start offset, its leader epoch and, from v1
(KIP-1226, Kafka 4.2), its lag. Errors are per group and per partition; no top-level code.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=90,
    name="DescribeShareGroupOffsets",
    valid="0-1",
    flexible="0+",
    fields=[
        array(
            "groups",
            "DescribeShareGroupOffsetsRequestGroup",
            "0+",
            [
                field("group_id", "string", "0+"),
                array(
                    "topics",
                    "DescribeShareGroupOffsetsRequestTopic",
                    "0+",
                    [
                        field("topic_name", "string", "0+"),
                        field("partitions", "[]int32", "0+"),
                    ],
                    nullable="0+",
                ),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=90,
    name="DescribeShareGroupOffsets",
    valid="0-1",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        array(
            "groups",
            "DescribeShareGroupOffsetsResponseGroup",
            "0+",
            [
                field("group_id", "string", "0+"),
                array(
                    "topics",
                    "DescribeShareGroupOffsetsResponseTopic",
                    "0+",
                    [
                        field("topic_name", "string", "0+"),
                        field("topic_id", "uuid", "0+"),
                        array(
                            "partitions",
                            "DescribeShareGroupOffsetsResponsePartition",
                            "0+",
                            [
                                field("partition_index", "int32", "0+"),
                                field("start_offset", "int64", "0+"),
                                field("leader_epoch", "int32", "0+"),
                                field("lag", "int64", "1+", default=-1, ignorable=True),
                                field("error_code", "int16", "0+"),
                                field("error_message", "string", "0+", nullable="0+", default=None),
                            ],
                        ),
                    ],
                ),
                field("error_code", "int16", "0+"),
                field("error_message", "string", "0+", nullable="0+", default=None),
            ],
        ),
    ],
)
