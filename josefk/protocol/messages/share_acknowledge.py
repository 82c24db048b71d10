"""ShareAcknowledge (key 79, KIP-932): acknowledgements of acquired records without a fetch.

It travels in the member's share session like ShareFetch (its epoch advances the session;
it cannot open one, and -1 acknowledges and then closes the session). Each batch is a range
of offsets with one acknowledge type for the range or one per offset (0 gap, 1 accept,
2 release, 3 reject).
v2 (Kafka 4.2, KIP-1222) adds is_renew_ack (the batches may carry type 4, renew: extend the
acquisition lock of records the member holds) and the lock timeout in the response.
"""

from josefk.protocol.schema import array, field, request, response, struct

REQUEST = request(
    api_key=79,
    name="ShareAcknowledge",
    valid="1-2",
    flexible="0+",
    fields=[
        field("group_id", "string", "0+", nullable="0+", default=None),
        field("member_id", "string", "0+", nullable="0+"),
        field("share_session_epoch", "int32", "0+"),
        field("is_renew_ack", "bool", "2+"),
        array(
            "topics",
            "AcknowledgeTopic",
            "0+",
            [
                field("topic_id", "uuid", "0+"),
                array(
                    "partitions",
                    "AcknowledgePartition",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        array(
                            "acknowledgement_batches",
                            "AcknowledgementBatch",
                            "0+",
                            [
                                field("first_offset", "int64", "0+"),
                                field("last_offset", "int64", "0+"),
                                field("acknowledge_types", "[]int8", "0+"),
                            ],
                        ),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=79,
    name="ShareAcknowledge",
    valid="1-2",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("error_code", "int16", "0+"),
        field("error_message", "string", "0+", nullable="0+", default=None),
        field("acquisition_lock_timeout_ms", "int32", "2+"),
        array(
            "responses",
            "ShareAcknowledgeTopicResponse",
            "0+",
            [
                field("topic_id", "uuid", "0+"),
                array(
                    "partitions",
                    "PartitionData",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("error_code", "int16", "0+"),
                        field("error_message", "string", "0+", nullable="0+", default=None),
                        struct(
                            "current_leader",
                            "LeaderIdAndEpoch",
                            "0+",
                            [
                                field("leader_id", "int32", "0+"),
                                field("leader_epoch", "int32", "0+"),
                            ],
                        ),
                    ],
                ),
            ],
        ),
        array(
            "node_endpoints",
            "NodeEndpoint",
            "0+",
            [
                field("node_id", "int32", "0+"),
                field("host", "string", "0+"),
                field("port", "int32", "0+"),
                field("rack", "string", "0+", nullable="0+", default=None),
            ],
        ),
    ],
)
