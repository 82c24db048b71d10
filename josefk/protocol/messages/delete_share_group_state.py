"""DeleteShareGroupState (key 86, KIP-932): a broker asks the share coordinator of share
partitions to delete their state (inter-broker; DeleteGroups, DeleteShareGroupOffsets).

Per partition an error code: NOT_COORDINATOR when another broker coordinates it. v0 is the
version Kafka 4.x serves.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=86,
    name="DeleteShareGroupState",
    valid="0",
    flexible="0+",
    fields=[
        field("group_id", "string", "0+"),
        array(
            "topics",
            "DeleteStateData",
            "0+",
            [
                field("topic_id", "uuid", "0+"),
                array("partitions", "PartitionData", "0+", [field("partition", "int32", "0+")]),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=86,
    name="DeleteShareGroupState",
    valid="0",
    flexible="0+",
    fields=[
        array(
            "results",
            "DeleteStateResult",
            "0+",
            [
                field("topic_id", "uuid", "0+"),
                array(
                    "partitions",
                    "PartitionResult",
                    "0+",
                    [
                        field("partition", "int32", "0+"),
                        field("error_code", "int16", "0+"),
                        field("error_message", "string", "0+", nullable="0+", default=None),
                    ],
                ),
            ],
        ),
    ],
)
