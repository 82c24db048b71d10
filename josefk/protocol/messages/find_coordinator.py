"""FindCoordinator (key 10): which broker coordinates a group, transaction or share partition.

v1 adds the key type (KIP-98), v3 is flexible (KIP-482), v4 looks up a batch of keys at once
(KIP-699), v5 may return TRANSACTION_ABORTABLE (KIP-890) and v6 adds share-group keys (KIP-932).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=10,
    name="FindCoordinator",
    valid="0-6",
    flexible="3+",
    fields=[
        field("key", "string", "0-3"),
        field("key_type", "int8", "1+", default=0),
        field("coordinator_keys", "[]string", "4+"),
    ],
)

RESPONSE = response(
    api_key=10,
    name="FindCoordinator",
    valid="0-6",
    flexible="3+",
    fields=[
        field("throttle_time_ms", "int32", "1+", ignorable=True),
        field("error_code", "int16", "0-3"),
        field("error_message", "string", "1-3", nullable="1-3", ignorable=True),
        field("node_id", "int32", "0-3"),
        field("host", "string", "0-3"),
        field("port", "int32", "0-3"),
        array(
            "coordinators",
            "Coordinator",
            "4+",
            [
                field("key", "string", "4+"),
                field("node_id", "int32", "4+"),
                field("host", "string", "4+"),
                field("port", "int32", "4+"),
                field("error_code", "int16", "4+"),
                field("error_message", "string", "4+", nullable="4+", ignorable=True),
            ],
        ),
    ],
)
