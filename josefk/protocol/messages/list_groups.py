"""ListGroups (key 16): the groups a broker coordinates.

v1 adds the throttle time, v3 is flexible (KIP-482), v4 filters by and returns the group state
(KIP-518) and v5 filters by and returns the group type (KIP-848).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=16,
    name="ListGroups",
    valid="0-5",
    flexible="3+",
    fields=[
        field("states_filter", "[]string", "4+"),
        field("types_filter", "[]string", "5+"),
    ],
)

RESPONSE = response(
    api_key=16,
    name="ListGroups",
    valid="0-5",
    flexible="3+",
    fields=[
        field("throttle_time_ms", "int32", "1+", ignorable=True),
        field("error_code", "int16", "0+"),
        array(
            "groups",
            "ListedGroup",
            "0+",
            [
                field("group_id", "string", "0+"),
                field("protocol_type", "string", "0+"),
                field("group_state", "string", "4+", ignorable=True),
                field("group_type", "string", "5+", ignorable=True),
            ],
        ),
    ],
)
