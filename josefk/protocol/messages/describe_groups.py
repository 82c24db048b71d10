"""DescribeGroups (key 15): state, protocol and members of classic groups.

v1 adds the throttle time, v3 authorized operations (KIP-430), v4 member instance ids
(KIP-345), v5 is flexible (KIP-482) and v6 an error message per group (KIP-1043).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=15,
    name="DescribeGroups",
    valid="0-6",
    flexible="5+",
    fields=[
        field("groups", "[]string", "0+"),
        field("include_authorized_operations", "bool", "3+", default=False),
    ],
)

RESPONSE = response(
    api_key=15,
    name="DescribeGroups",
    valid="0-6",
    flexible="5+",
    fields=[
        field("throttle_time_ms", "int32", "1+", ignorable=True),
        array(
            "groups",
            "DescribedGroup",
            "0+",
            [
                field("error_code", "int16", "0+"),
                field("error_message", "string", "6+", nullable="6+", default=None),
                field("group_id", "string", "0+"),
                field("group_state", "string", "0+"),
                field("protocol_type", "string", "0+"),
                field("protocol_data", "string", "0+"),
                array(
                    "members",
                    "DescribedGroupMember",
                    "0+",
                    [
                        field("member_id", "string", "0+"),
                        field(
                            "group_instance_id",
                            "string",
                            "4+",
                            nullable="4+",
                            default=None,
                            ignorable=True,
                        ),
                        field("client_id", "string", "0+"),
                        field("client_host", "string", "0+"),
                        field("member_metadata", "bytes", "0+"),
                        field("member_assignment", "bytes", "0+"),
                    ],
                ),
                # INT32_MIN means "not requested", as in Kafka.
                field("authorized_operations", "int32", "3+", default=-(2**31)),
            ],
        ),
    ],
)
