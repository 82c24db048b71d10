"""ShareGroupHeartbeat (key 76, KIP-932): a member of a share group joins, stays, leaves.

The member generates its own id (v1); epoch 0 joins, -1 leaves. The subscription is null
when unchanged since the last heartbeat. The answer carries the member's epoch and, when it
changed, the partitions assigned to it (a partition may be assigned to many members).
v0 was Kafka 4.0's early-access version and is not served by Kafka 4.1 and later.
"""

from dataclasses import replace

from josefk.protocol.schema import array, field, request, response, struct

REQUEST = request(
    api_key=76,
    name="ShareGroupHeartbeat",
    valid="1",
    flexible="0+",
    fields=[
        field("group_id", "string", "0+"),
        field("member_id", "string", "0+"),
        field("member_epoch", "int32", "0+"),
        field("rack_id", "string", "0+", nullable="0+", default=None),
        field("subscribed_topic_names", "[]string", "0+", nullable="0+", default=None),
    ],
)

_assignment = struct(
    "assignment",
    "Assignment",
    "0+",
    [
        array(
            "topic_partitions",
            "TopicPartitions",
            "0+",
            [
                field("topic_id", "uuid", "0+"),
                field("partitions", "[]int32", "0+"),
            ],
        )
    ],
    nullable="0+",
)

RESPONSE = response(
    api_key=76,
    name="ShareGroupHeartbeat",
    valid="1",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("error_code", "int16", "0+"),
        field("error_message", "string", "0+", nullable="0+", default=None),
        field("member_id", "string", "0+", nullable="0+", default=None),
        field("member_epoch", "int32", "0+"),
        field("heartbeat_interval_ms", "int32", "0+"),
        replace(_assignment, default=None),
    ],
)
