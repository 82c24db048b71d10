"""DeleteGroups (key 42): delete empty groups and their committed offsets (KIP-229).

v1 changes only throttling behaviour, v2 is flexible (KIP-482).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=42,
    name="DeleteGroups",
    valid="0-2",
    flexible="2+",
    fields=[
        field("groups_names", "[]string", "0+"),
    ],
)

RESPONSE = response(
    api_key=42,
    name="DeleteGroups",
    valid="0-2",
    flexible="2+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        array(
            "results",
            "DeletableGroupResult",
            "0+",
            [
                field("group_id", "string", "0+"),
                field("error_code", "int16", "0+"),
            ],
        ),
    ],
)
