"""JoinGroup (key 11): a member joins a classic group and the coordinator elects a leader.

v1 adds the rebalance timeout, v4 requires a second join with the assigned member id (KIP-394),
v5 static membership (KIP-345), v6 is flexible (KIP-482), v7 returns the protocol type (KIP-559),
v8 adds the join reason (KIP-800) and v9 skip_assignment for server-side assignors (KIP-814).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=11,
    name="JoinGroup",
    valid="0-9",
    flexible="6+",
    fields=[
        field("group_id", "string", "0+"),
        field("session_timeout_ms", "int32", "0+"),
        # Without a rebalance timeout (v0) the coordinator uses the session timeout instead.
        field("rebalance_timeout_ms", "int32", "1+", default=-1, ignorable=True),
        field("member_id", "string", "0+"),
        field("group_instance_id", "string", "5+", nullable="5+", default=None),
        field("protocol_type", "string", "0+"),
        array(
            "protocols",
            "JoinGroupRequestProtocol",
            "0+",
            [
                field("name", "string", "0+"),
                field("metadata", "bytes", "0+"),
            ],
        ),
        field("reason", "string", "8+", nullable="8+", default=None, ignorable=True),
    ],
)

RESPONSE = response(
    api_key=11,
    name="JoinGroup",
    valid="0-9",
    flexible="6+",
    fields=[
        field("throttle_time_ms", "int32", "2+", ignorable=True),
        field("error_code", "int16", "0+"),
        field("generation_id", "int32", "0+", default=-1),
        field("protocol_type", "string", "7+", nullable="7+", default=None, ignorable=True),
        field("protocol_name", "string", "0+", nullable="7+"),
        field("leader", "string", "0+"),
        field("skip_assignment", "bool", "9+", default=False),
        field("member_id", "string", "0+"),
        array(
            "members",
            "JoinGroupResponseMember",
            "0+",
            [
                field("member_id", "string", "0+"),
                field(
                    "group_instance_id",
                    "string",
                    "5+",
                    nullable="5+",
                    default=None,
                    ignorable=True,
                ),
                field("metadata", "bytes", "0+"),
            ],
        ),
    ],
)
