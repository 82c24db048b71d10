"""EndTxn (key 26): commit or abort a producer's transaction.

v2 may return PRODUCER_FENCED (KIP-588), v3 is flexible (KIP-482), v4 may return
TRANSACTION_ABORTABLE and v5 bumps the epoch on every transaction, returning the producer id and
epoch to continue with (KIP-890 part 2).
"""

from josefk.protocol.schema import field, request, response

REQUEST = request(
    api_key=26,
    name="EndTxn",
    valid="0-5",
    flexible="3+",
    fields=[
        field("transactional_id", "string", "0+"),
        field("producer_id", "int64", "0+"),
        field("producer_epoch", "int16", "0+"),
        field("committed", "bool", "0+"),
    ],
)

RESPONSE = response(
    api_key=26,
    name="EndTxn",
    valid="0-5",
    flexible="3+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("error_code", "int16", "0+"),
        field("producer_id", "int64", "5+", default=-1, ignorable=True),
        field("producer_epoch", "int16", "5+", default=-1, ignorable=True),
    ],
)
