"""TxnOffsetCommit (key 28): commit a group's offsets inside a producer's transaction.

v2 adds the leader epoch (KIP-320), v3 is flexible and adds the group membership fields so the
coordinator can fence zombies (KIP-447), v4 may return TRANSACTION_ABORTABLE (KIP-890) and v5
implies the AddOffsetsToTxn step under transaction version 2 (KIP-890 part 2).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=28,
    name="TxnOffsetCommit",
    valid="0-5",
    flexible="3+",
    fields=[
        field("transactional_id", "string", "0+"),
        field("group_id", "string", "0+"),
        field("producer_id", "int64", "0+"),
        field("producer_epoch", "int16", "0+"),
        field("generation_id", "int32", "3+", default=-1),
        field("member_id", "string", "3+", default=""),
        field("group_instance_id", "string", "3+", nullable="3+", default=None),
        array(
            "topics",
            "TxnOffsetCommitRequestTopic",
            "0+",
            [
                field("name", "string", "0+"),
                array(
                    "partitions",
                    "TxnOffsetCommitRequestPartition",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("committed_offset", "int64", "0+"),
                        field("committed_leader_epoch", "int32", "2+", default=-1, ignorable=True),
                        field("committed_metadata", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=28,
    name="TxnOffsetCommit",
    valid="0-5",
    flexible="3+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        array(
            "topics",
            "TxnOffsetCommitResponseTopic",
            "0+",
            [
                field("name", "string", "0+"),
                array(
                    "partitions",
                    "TxnOffsetCommitResponsePartition",
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
