"""ConsumerGroupHeartbeat (key 68): a member of a KIP-848 consumer group joins, stays, leaves.

Every field the member sends may be null (or -1) when it did not change since its last
heartbeat; the coordinator answers with the member's epoch and, when it changed, the
partitions the member owns now. v1 (KIP-1082) has the consumer generate its own member id
and adds the regular expression subscription (SubscribedTopicRegex, KIP-848).
"""

from dataclasses import replace

from josefk.protocol.schema import Field, array, field, request, response, struct


def _topic_partitions(name: str, versions: str) -> Field:
    return array(
        name,
        "TopicPartitions",
        versions,
        [
            field("topic_id", "uuid", "0+"),
            field("partitions", "[]int32", "0+"),
        ],
        nullable="0+",
    )


REQUEST = request(
    api_key=68,
    name="ConsumerGroupHeartbeat",
    valid="0-1",
    flexible="0+",
    fields=[
        field("group_id", "string", "0+"),
        field("member_id", "string", "0+"),
        field("member_epoch", "int32", "0+"),
        field("instance_id", "string", "0+", nullable="0+", default=None),
        field("rack_id", "string", "0+", nullable="0+", default=None),
        field("rebalance_timeout_ms", "int32", "0+", default=-1),
        field("subscribed_topic_names", "[]string", "0+", nullable="0+", default=None),
        field("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
        field("server_assignor", "string", "0+", nullable="0+", default=None),
        replace(_topic_partitions("topic_partitions", "0+"), default=None),
    ],
)

_assignment = struct(
    "assignment",
    "Assignment",
    "0+",
    [_topic_partitions("topic_partitions", "0+")],
    nullable="0+",
)

RESPONSE = response(
    api_key=68,
    name="ConsumerGroupHeartbeat",
    valid="0-1",
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
