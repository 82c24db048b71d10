"""AlterPartitionReassignments (key 45): move partitions to new replica sets, or cancel a move
in progress (null replicas).

KIP-455 introduced it (flexible from v0); v1 (KIP-860) lets the caller forbid a change of the
replication factor, and echoes that choice in the response.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=45,
    name="AlterPartitionReassignments",
    valid="0-1",
    flexible="0+",
    fields=[
        field("timeout_ms", "int32", "0+", default=60000),
        field("allow_replication_factor_change", "bool", "1+", default=True),
        array(
            "topics",
            "ReassignableTopic",
            "0+",
            [
                field("name", "string", "0+"),
                array(
                    "partitions",
                    "ReassignablePartition",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        # The target replicas in preference order; null cancels the move.
                        field("replicas", "[]int32", "0+", nullable="0+", default=None),
                    ],
                ),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=45,
    name="AlterPartitionReassignments",
    valid="0-1",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("allow_replication_factor_change", "bool", "1+", default=True, ignorable=True),
        field("error_code", "int16", "0+"),
        field("error_message", "string", "0+", nullable="0+"),
        array(
            "responses",
            "ReassignableTopicResponse",
            "0+",
            [
                field("name", "string", "0+"),
                array(
                    "partitions",
                    "ReassignablePartitionResponse",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("error_code", "int16", "0+"),
                        field("error_message", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)
