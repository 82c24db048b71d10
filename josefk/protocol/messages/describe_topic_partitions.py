"""DescribeTopicPartitions (key 75): topic and partition metadata for admin clients, paged by
a cursor (topic name, partition index) so that huge topics fit in bounded responses.

KIP-966 introduced it (v0, flexible) together with eligible leader replicas (ELR): a response
stops after ``response_partition_limit`` partitions and ``next_cursor`` says where the next
request should start.
"""

from dataclasses import replace

from josefk.protocol.schema import Field, array, field, request, response, struct

# INT32_MIN: "authorized operations were not requested".
_OPERATIONS_NOT_REQUESTED = -(2**31)


def _cursor(name: str) -> Field:
    # struct() takes no default; Kafka's is null (no cursor), not an empty Cursor.
    cursor = struct(
        name,
        "Cursor",
        "0+",
        [
            field("topic_name", "string", "0+"),
            field("partition_index", "int32", "0+"),
        ],
        nullable="0+",
    )
    return replace(cursor, default=None)


REQUEST = request(
    api_key=75,
    name="DescribeTopicPartitions",
    valid="0",
    flexible="0+",
    fields=[
        array("topics", "TopicRequest", "0+", [field("name", "string", "0+")]),
        field("response_partition_limit", "int32", "0+", default=2000),
        # Null starts from the first requested topic.
        _cursor("cursor"),
    ],
)

RESPONSE = response(
    api_key=75,
    name="DescribeTopicPartitions",
    valid="0",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+", ignorable=True),
        array(
            "topics",
            "DescribeTopicPartitionsResponseTopic",
            "0+",
            [
                field("error_code", "int16", "0+"),
                field("name", "string", "0+", nullable="0+"),
                field("topic_id", "uuid", "0+", ignorable=True),
                field("is_internal", "bool", "0+", default=False, ignorable=True),
                array(
                    "partitions",
                    "DescribeTopicPartitionsResponsePartition",
                    "0+",
                    [
                        field("error_code", "int16", "0+"),
                        field("partition_index", "int32", "0+"),
                        field("leader_id", "int32", "0+"),
                        field("leader_epoch", "int32", "0+", default=-1, ignorable=True),
                        field("replica_nodes", "[]int32", "0+"),
                        field("isr_nodes", "[]int32", "0+"),
                        field(
                            "eligible_leader_replicas",
                            "[]int32",
                            "0+",
                            nullable="0+",
                            default=None,
                        ),
                        field("last_known_elr", "[]int32", "0+", nullable="0+", default=None),
                        field("offline_replicas", "[]int32", "0+", ignorable=True),
                    ],
                ),
                field(
                    "topic_authorized_operations",
                    "int32",
                    "0+",
                    default=_OPERATIONS_NOT_REQUESTED,
                ),
            ],
        ),
        # Null when every requested partition fitted in this response.
        _cursor("next_cursor"),
    ],
)
