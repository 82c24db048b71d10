"""OffsetDelete (key 47): delete a group's committed offsets for some partitions (KIP-496).

A single, non-flexible version.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=47,
    name="OffsetDelete",
    valid="0",
    flexible="none",
    fields=[
        field("group_id", "string", "0+"),
        array(
            "topics",
            "OffsetDeleteRequestTopic",
            "0+",
            [
                field("name", "string", "0+"),
                array(
                    "partitions",
                    "OffsetDeleteRequestPartition",
                    "0+",
                    [field("partition_index", "int32", "0+")],
                ),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=47,
    name="OffsetDelete",
    valid="0",
    flexible="none",
    fields=[
        field("error_code", "int16", "0+"),
        field("throttle_time_ms", "int32", "0+", ignorable=True),
        array(
            "topics",
            "OffsetDeleteResponseTopic",
            "0+",
            [
                field("name", "string", "0+"),
                array(
                    "partitions",
                    "OffsetDeleteResponsePartition",
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
