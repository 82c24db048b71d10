"""ListTransactions (key 66): the transactions a coordinator knows, with filters (KIP-664).

v1 filters by running time (KIP-994), v2 by a transactional id pattern (KIP-1152).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=66,
    name="ListTransactions",
    valid="0-2",
    flexible="0+",
    fields=[
        field("state_filters", "[]string", "0+"),
        field("producer_id_filters", "[]int64", "0+"),
        field("duration_filter", "int64", "1+", default=-1),
        field("transactional_id_pattern", "string", "2+", nullable="2+", default=None),
    ],
)

RESPONSE = response(
    api_key=66,
    name="ListTransactions",
    valid="0-2",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("error_code", "int16", "0+"),
        field("unknown_state_filters", "[]string", "0+"),
        array(
            "transaction_states",
            "TransactionState",
            "0+",
            [
                field("transactional_id", "string", "0+"),
                field("producer_id", "int64", "0+"),
                field("transaction_state", "string", "0+"),
            ],
        ),
    ],
)
