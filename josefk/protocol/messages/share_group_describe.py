"""ShareGroupDescribe (key 77, KIP-932): the state, epochs and members of share groups.

Like ConsumerGroupDescribe without instance ids, regular expressions and target
assignments: each member has its epoch, subscription and assigned partitions.
"""

from josefk.protocol.schema import array, field, request, response, struct

# INT32_MIN: "authorized operations were not requested".
_OPERATIONS_NOT_REQUESTED = -(2**31)

REQUEST = request(
    api_key=77,
    name="ShareGroupDescribe",
    valid="1",
    flexible="0+",
    fields=[
        field("group_ids", "[]string", "0+"),
        field("include_authorized_operations", "bool", "0+", default=False),
    ],
)

RESPONSE = response(
    api_key=77,
    name="ShareGroupDescribe",
    valid="1",
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
                        field("rack_id", "string", "0+", nullable="0+", default=None),
                        field("member_epoch", "int32", "0+"),
                        field("client_id", "string", "0+"),
                        field("client_host", "string", "0+"),
                        field("subscribed_topic_names", "[]string", "0+"),
                        struct(
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
                                        field("topic_name", "string", "0+"),
                                        field("partitions", "[]int32", "0+"),
                                    ],
                                ),
                            ],
                        ),
                    ],
                ),
                field("authorized_operations", "int32", "0+", default=_OPERATIONS_NOT_REQUESTED),
            ],
        ),
    ],
)
