"""LeaveGroup (key 13): members leave a classic group, triggering a rebalance.

v1 adds the throttle time, v3 removes a batch of members by id or instance id (KIP-345),
v4 is flexible (KIP-482) and v5 adds a reason per member (KIP-800).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=13,
    name="LeaveGroup",
    valid="0-5",
    flexible="4+",
    fields=[
        field("group_id", "string", "0+"),
        field("member_id", "string", "0-2"),
        array(
            "members",
            "MemberIdentity",
            "3+",
            [
                field("member_id", "string", "3+"),
                field("group_instance_id", "string", "3+", nullable="3+", default=None),
                field("reason", "string", "5+", nullable="5+", default=None, ignorable=True),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=13,
    name="LeaveGroup",
    valid="0-5",
    flexible="4+",
    fields=[
        field("throttle_time_ms", "int32", "1+", ignorable=True),
        field("error_code", "int16", "0+"),
        array(
            "members",
            "MemberResponse",
            "3+",
            [
                field("member_id", "string", "3+"),
                field("group_instance_id", "string", "3+", nullable="3+"),
                field("error_code", "int16", "3+"),
            ],
        ),
    ],
)
