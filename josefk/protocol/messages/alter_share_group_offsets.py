"""AlterShareGroupOffsets (key 91, KIP-932): set the share-partition start offsets of an empty
share group (``kafka-share-groups --reset-offsets``).

Per topic and partition the new start offset; the answer has a top-level error (the group's:
GROUP_AUTHORIZATION_FAILED, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, ...) and one per partition.
v0 is the version Kafka 4.1 and 4.2 serve.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=91,
    name="AlterShareGroupOffsets",
    valid="0",
    flexible="0+",
    fields=[
        field("group_id", "string", "0+"),
        array(
            "topics",
            "AlterShareGroupOffsetsRequestTopic",
            "0+",
            [
                field("topic_name", "string", "0+"),
                array(
                    "partitions",
                    "AlterShareGroupOffsetsRequestPartition",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("start_offset", "int64", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=91,
    name="AlterShareGroupOffsets",
    valid="0",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("error_code", "int16", "0+"),
        field("error_message", "string", "0+", nullable="0+", default=None),
        array(
            "responses",
            "AlterShareGroupOffsetsResponseTopic",
            "0+",
            [
                field("topic_name", "string", "0+"),
                field("topic_id", "uuid", "0+"),
                array(
                    "partitions",
                    "AlterShareGroupOffsetsResponsePartition",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("error_code", "int16", "0+"),
                        field("error_message", "string", "0+", nullable="0+", default=None),
                    ],
                ),
            ],
        ),
    ],
)
