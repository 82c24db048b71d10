"""SyncGroup (key 14): the leader hands out assignments and every member receives its own.

v1 adds the throttle time, v3 static membership (KIP-345), v4 is flexible (KIP-482) and v5 sends
and returns the protocol type and name so both sides can check them (KIP-559).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=14,
    name="SyncGroup",
    valid="0-5",
    flexible="4+",
    fields=[
        field("group_id", "string", "0+"),
        field("generation_id", "int32", "0+"),
        field("member_id", "string", "0+"),
        field("group_instance_id", "string", "3+", nullable="3+", default=None),
        field("protocol_type", "string", "5+", nullable="5+", default=None, ignorable=True),
        field("protocol_name", "string", "5+", nullable="5+", default=None, ignorable=True),
        array(
            "assignments",
            "SyncGroupRequestAssignment",
            "0+",
            [
                field("member_id", "string", "0+"),
                field("assignment", "bytes", "0+"),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=14,
    name="SyncGroup",
    valid="0-5",
    flexible="4+",
    fields=[
        field("throttle_time_ms", "int32", "1+", ignorable=True),
        field("error_code", "int16", "0+"),
        field("protocol_type", "string", "5+", nullable="5+", default=None, ignorable=True),
        field("protocol_name", "string", "5+", nullable="5+", default=None, ignorable=True),
        field("assignment", "bytes", "0+"),
    ],
)
