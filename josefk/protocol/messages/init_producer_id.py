"""InitProducerId (key 22): obtain a producer id and epoch for idempotence or transactions.

v2 is flexible (KIP-482), v3 lets a producer resume with its current id and epoch (KIP-360),
v4 may return PRODUCER_FENCED (KIP-588), v5 TRANSACTION_ABORTABLE (KIP-890) and v6 adds
two-phase commit (KIP-939).
"""

from josefk.protocol.schema import field, request, response

REQUEST = request(
    api_key=22,
    name="InitProducerId",
    valid="0-6",
    flexible="2+",
    fields=[
        field("transactional_id", "string", "0+", nullable="0+"),
        field("transaction_timeout_ms", "int32", "0+"),
        field("producer_id", "int64", "3+", default=-1),
        field("producer_epoch", "int16", "3+", default=-1),
        field("enable_2pc", "bool", "6+", default=False),
        field("keep_prepared_txn", "bool", "6+", default=False),
    ],
)

RESPONSE = response(
    api_key=22,
    name="InitProducerId",
    valid="0-6",
    flexible="2+",
    fields=[
        field("throttle_time_ms", "int32", "0+", ignorable=True),
        field("error_code", "int16", "0+"),
        field("producer_id", "int64", "0+", default=-1),
        field("producer_epoch", "int16", "0+"),
        field("ongoing_txn_producer_id", "int64", "6+", default=-1),
        field("ongoing_txn_producer_epoch", "int16", "6+", default=-1),
    ],
)
