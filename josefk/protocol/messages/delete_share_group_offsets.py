"""DeleteShareGroupOffsets (key 92, KIP-932): forget an empty share group's share-partition
state for whole topics (their partitions are then started afresh, by
``share.auto.offset.reset``, when the group next reads them).

The answer has a top-level error (the group's) and one per topic. v0 is the version Kafka 4.1
and 4.2 serve.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=92,
    name="DeleteShareGroupOffsets",
    valid="0",
    flexible="0+",
    fields=[
        field("group_id", "string", "0+"),
        array(
            "topics",
            "DeleteShareGroupOffsetsRequestTopic",
            "0+",
            [field("topic_name", "string", "0+")],
        ),
    ],
)

RESPONSE = response(
    api_key=92,
    name="DeleteShareGroupOffsets",
    valid="0",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("error_code", "int16", "0+"),
        field("error_message", "string", "0+", nullable="0+", default=None),
        array(
            "responses",
            "DeleteShareGroupOffsetsResponseTopic",
            "0+",
            [
                field("topic_name", "string", "0+"),
                field("topic_id", "uuid", "0+"),
                field("error_code", "int16", "0+"),
                field("error_message", "string", "0+", nullable="0+", default=None),
            ],
        ),
    ],
)
