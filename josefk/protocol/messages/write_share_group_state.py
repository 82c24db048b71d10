"""WriteShareGroupState (key 85, KIP-932): a share-partition leader writes the state of its
share partitions to their share coordinator (inter-broker).

Per partition: the state epoch, the writer's leader epoch (a lower one than the coordinator
keeps is refused: FENCED_LEADER_EPOCH), the share-partition start offset (-1: unchanged) and
the state batches that changed. The coordinator answers once the state is in
``__share_group_state``, replicated. v0 is the version Kafka 4.x serves.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=85,
    name="WriteShareGroupState",
    valid="0",
    flexible="0+",
    fields=[
        field("group_id", "string", "0+"),
        array(
            "topics",
            "WriteStateData",
            "0+",
            [
                field("topic_id", "uuid", "0+"),
                array(
                    "partitions",
                    "PartitionData",
                    "0+",
                    [
                        field("partition", "int32", "0+"),
                        field("state_epoch", "int32", "0+"),
                        field("leader_epoch", "int32", "0+"),
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

RESPONSE = response(
    api_key=85,
    name="WriteShareGroupState",
    valid="0",
    flexible="0+",
    fields=[
        array(
            "results",
            "WriteStateResult",
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
