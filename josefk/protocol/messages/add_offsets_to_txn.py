"""AddOffsetsToTxn (key 25): add a group's offset commits to a producer's transaction.

v2 may return PRODUCER_FENCED (KIP-588), v3 is flexible (KIP-482), v4 may return
TRANSACTION_ABORTABLE (KIP-890).
"""

from josefk.protocol.schema import field, request, response

REQUEST = request(
    api_key=25,
    name="AddOffsetsToTxn",
    valid="0-4",
    flexible="3+",
    fields=[
        field("transactional_id", "string", "0+"),
        field("producer_id", "int64", "0+"),
        field("producer_epoch", "int16", "0+"),
        field("group_id", "string", "0+"),
    ],
)

RESPONSE = response(
    api_key=25,
    name="AddOffsetsToTxn",
    valid="0-4",
    flexible="3+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("error_code", "int16", "0+"),
    ],
)
