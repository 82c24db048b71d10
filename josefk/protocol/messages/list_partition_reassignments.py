"""ListPartitionReassignments (key 46): the partitions being moved, with their full replica
set and the replicas being added and removed; all of them when the topic list is null.

KIP-455 introduced it, flexible from v0.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=46,
    name="ListPartitionReassignments",
    valid="0",
    flexible="0+",
    fields=[
        field("timeout_ms", "int32", "0+", default=60000),
        array(
            "topics",
            "ListPartitionReassignmentsTopics",
            "0+",
            [
                field("name", "string", "0+"),
                field("partition_indexes", "[]int32", "0+"),
            ],
            nullable="0+",
        ),
    ],
)

RESPONSE = response(
    api_key=46,
    name="ListPartitionReassignments",
    valid="0",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("error_code", "int16", "0+"),
        field("error_message", "string", "0+", nullable="0+"),
        array(
            "topics",
            "OngoingTopicReassignment",
            "0+",
            [
                field("name", "string", "0+"),
                array(
                    "partitions",
                    "OngoingPartitionReassignment",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("replicas", "[]int32", "0+"),
                        field("adding_replicas", "[]int32", "0+"),
                        field("removing_replicas", "[]int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)
