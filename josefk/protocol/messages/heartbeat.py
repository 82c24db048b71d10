"""Heartbeat (key 12): a classic-group member tells the coordinator it is alive.

v1 adds the throttle time, v3 static membership (KIP-345), v4 is flexible (KIP-482).
"""

from josefk.protocol.schema import field, request, response

REQUEST = request(
    api_key=12,
    name="Heartbeat",
    valid="0-4",
    flexible="4+",
    fields=[
        field("group_id", "string", "0+"),
        field("generation_id", "int32", "0+"),
        field("member_id", "string", "0+"),
        field("group_instance_id", "string", "3+", nullable="3+", default=None),
    ],
)

RESPONSE = response(
    api_key=12,
    name="Heartbeat",
    valid="0-4",
    flexible="4+",
    fields=[
        field("throttle_time_ms", "int32", "1+", ignorable=True),
        field("error_code", "int16", "0+"),
    ],
)
