"""ReadShareGroupState (key 84, KIP-932): a share-partition leader reads the state of its share
partitions from their share coordinator (inter-broker).

Per partition the request names the reader's leader epoch (the coordinator records a higher
one and refuses a lower one); the answer has the state epoch, the share-partition start
offset and the state batches (first and last offset, delivery state 0 available,
2 acknowledged, 4 archived, delivery count). v0 is the version Kafka 4.x serves.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=84,
    name="ReadShareGroupState",
    valid="0",
    flexible="0+",
    fields=[
        field("group_id", "string", "0+"),
        array(
            "topics",
            "ReadStateData",
            "0+",
            [
                field("topic_id", "uuid", "0+"),
                array(
                    "partitions",
                    "PartitionData",
                    "0+",
                    [
                        field("partition", "int32", "0+"),
                        field("leader_epoch", "int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=84,
    name="ReadShareGroupState",
    valid="0",
    flexible="0+",
    fields=[
        array(
            "results",
            "ReadStateResult",
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
                        field("state_epoch", "int32", "0+"),
                        field("start_offset", "int64", "0+"),
                        array(
                            "state_batches",
                            "StateBatch",
                            "0+",
                            [
                                field("first_offset", "int64", "0+"),
                                field("last_offset", "int64", "0+"),
                                field("delivery_state", "int8", "0+"),
                                field("delivery_count", "int16", "0+"),
                            ],
                        ),
                    ],
                ),
            ],
        ),
    ],
)
