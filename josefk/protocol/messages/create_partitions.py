"""CreatePartitions (key 37): raise topics' partition counts, optionally placing the new
partitions' replicas explicitly.

KIP-195 introduced it; v1 answers before throttling; v2 is flexible (KIP-482); KIP-599 (v3)
may answer THROTTLING_QUOTA_EXCEEDED. Kafka 4.0 still accepts v0.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=37,
    name="CreatePartitions",
    valid="0-3",
    flexible="2+",
    fields=[
        array(
            "topics",
            "CreatePartitionsTopic",
            "0+",
            [
                field("name", "string", "0+"),
                # The new total number of partitions, not the number to add.
                field("count", "int32", "0+"),
                # One entry per new partition; null lets the controller place them.
                array(
                    "assignments",
                    "CreatePartitionsAssignment",
                    "0+",
                    [field("broker_ids", "[]int32", "0+")],
                    nullable="0+",
                ),
            ],
        ),
        field("timeout_ms", "int32", "0+"),
        field("validate_only", "bool", "0+"),
    ],
)

RESPONSE = response(
    api_key=37,
    name="CreatePartitions",
    valid="0-3",
    flexible="2+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        array(
            "results",
            "CreatePartitionsTopicResult",
            "0+",
            [
                field("name", "string", "0+"),
                field("error_code", "int16", "0+"),
                field("error_message", "string", "0+", nullable="0+", default=None),
            ],
        ),
    ],
)
