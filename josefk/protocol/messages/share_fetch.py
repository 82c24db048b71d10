"""ShareFetch (key 78, KIP-932): a share-group member fetches records and acquires them.

The request travels in a share session (epoch 0 opens one, -1 closes it, otherwise the next
epoch) keyed by group and member; the topics listed are added to the session, the forgotten
ones leave it. Acknowledgements of records acquired earlier ride on the request, as batches of
offsets with one acknowledge type for the whole range or one per offset (0 gap, 1 accept,
2 release, 3 reject). The response has, per partition, the records and the ranges of them now
acquired by this member with their delivery counts, and the acquisition lock timeout.
v1 (Kafka 4.1) adds max_records and batch_size; v0 was the early-access version.
v2 (Kafka 4.2) adds share_acquire_mode (KIP-1206: 0 batch-optimized, 1 record-limit) and
is_renew_ack (KIP-1222: the batches may carry the acknowledge type 4, renew, which extends
the acquisition lock of records the member holds; such a request fetches nothing).
"""

from josefk.protocol.schema import Field, array, field, request, response, struct


def _acknowledgement_batches(versions: str) -> Field:
    return array(
        "acknowledgement_batches",
        "AcknowledgementBatch",
        versions,
        [
            field("first_offset", "int64", "0+"),
            field("last_offset", "int64", "0+"),
            field("acknowledge_types", "[]int8", "0+"),
        ],
    )


REQUEST = request(
    api_key=78,
    name="ShareFetch",
    valid="1-2",
    flexible="0+",
    fields=[
        field("group_id", "string", "0+", nullable="0+", default=None),
        field("member_id", "string", "0+", nullable="0+"),
        field("share_session_epoch", "int32", "0+"),
        field("max_wait_ms", "int32", "0+"),
        field("min_bytes", "int32", "0+"),
        field("max_bytes", "int32", "0+", default=0x7FFFFFFF),
        field("max_records", "int32", "1+"),
        field("batch_size", "int32", "1+"),
        field("share_acquire_mode", "int8", "2+"),
        field("is_renew_ack", "bool", "2+"),
        array(
            "topics",
            "FetchTopic",
            "0+",
            [
                field("topic_id", "uuid", "0+"),
                array(
                    "partitions",
                    "FetchPartition",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        _acknowledgement_batches("0+"),
                    ],
                ),
            ],
        ),
        array(
            "forgotten_topics_data",
            "ForgottenTopic",
            "0+",
            [
                field("topic_id", "uuid", "0+"),
                field("partitions", "[]int32", "0+"),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=78,
    name="ShareFetch",
    valid="1-2",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("error_code", "int16", "0+"),
        field("error_message", "string", "0+", nullable="0+", default=None),
        field("acquisition_lock_timeout_ms", "int32", "1+"),
        array(
            "responses",
            "ShareFetchableTopicResponse",
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
                        field("acknowledge_error_code", "int16", "0+"),
                        field(
                            "acknowledge_error_message",
                            "string",
                            "0+",
                            nullable="0+",
                            default=None,
                        ),
                        struct(
                            "current_leader",
                            "LeaderIdAndEpoch",
                            "0+",
                            [
                                field("leader_id", "int32", "0+"),
                                field("leader_epoch", "int32", "0+"),
                            ],
                        ),
                        field("records", "records", "0+", nullable="0+"),
                        array(
                            "acquired_records",
                            "AcquiredRecords",
                            "0+",
                            [
                                field("first_offset", "int64", "0+"),
                                field("last_offset", "int64", "0+"),
                                field("delivery_count", "int16", "0+"),
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
