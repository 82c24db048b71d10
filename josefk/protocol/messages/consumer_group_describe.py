"""ConsumerGroupDescribe (key 69): the state, epochs and assignments of KIP-848 groups.

Each member comes with its epoch, subscription and two assignments: the partitions it owns
now and its target. v1 adds the member type (KIP-1099: 0 a classic-protocol member of a
consumer group, 1 a consumer-protocol member, -1 unknown).
"""

from josefk.protocol.schema import Field, array, field, request, response, struct

# INT32_MIN: "authorized operations were not requested".
_OPERATIONS_NOT_REQUESTED = -(2**31)


def _assignment(name: str) -> Field:
    return struct(
        name,
        "Assignment",
        "0+",
        [
            array(
                "topic_partitions",
                "TopicPartitions",
                "0+",
                [
                    field("topic_id", "uuid", "0+"),
                    field("topic_name", "string", "0+"),
                    field("partitions", "[]int32", "0+"),
                ],
            ),
        ],
    )


REQUEST = request(
    api_key=69,
    name="ConsumerGroupDescribe",
    valid="0-1",
    flexible="0+",
    fields=[
        field("group_ids", "[]string", "0+"),
        field("include_authorized_operations", "bool", "0+", default=False),
    ],
)

RESPONSE = response(
    api_key=69,
    name="ConsumerGroupDescribe",
    valid="0-1",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        array(
            "groups",
            "DescribedGroup",
            "0+",
            [
                field("error_code", "int16", "0+"),
                field("error_message", "string", "0+", nullable="0+", default=None),
                field("group_id", "string", "0+"),
                field("group_state", "string", "0+"),
                field("group_epoch", "int32", "0+"),
                field("assignment_epoch", "int32", "0+"),
                field("assignor_name", "string", "0+"),
                array(
                    "members",
                    "Member",
                    "0+",
                    [
                        field("member_id", "string", "0+"),
                        field("instance_id", "string", "0+", nullable="0+", default=None),
                        field("rack_id", "string", "0+", nullable="0+", default=None),
                        field("member_epoch", "int32", "0+"),
                        field("client_id", "string", "0+"),
                        field("client_host", "string", "0+"),
                        field("subscribed_topic_names", "[]string", "0+"),
                        field(
                            "subscribed_topic_regex", "string", "0+", nullable="0+", default=None
                        ),
                        _assignment("assignment"),
                        _assignment("target_assignment"),
                        field("member_type", "int8", "1+", default=-1, ignorable=True),
                    ],
                ),
                field("authorized_operations", "int32", "0+", default=_OPERATIONS_NOT_REQUESTED),
            ],
        ),
    ],
)
