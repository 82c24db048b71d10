"""DescribeTransactions (key 65): a transaction coordinator's view of transactional ids
(KIP-664). A single version, flexible from the start.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=65,
    name="DescribeTransactions",
    valid="0",
    flexible="0+",
    fields=[
        field("transactional_ids", "[]string", "0+"),
    ],
)

RESPONSE = response(
    api_key=65,
    name="DescribeTransactions",
    valid="0",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        array(
            "transaction_states",
            "TransactionState",
            "0+",
            [
                field("error_code", "int16", "0+"),
                field("transactional_id", "string", "0+"),
                field("transaction_state", "string", "0+"),
                field("transaction_timeout_ms", "int32", "0+"),
                field("transaction_start_time_ms", "int64", "0+"),
                field("producer_id", "int64", "0+"),
                field("producer_epoch", "int16", "0+"),
                array(
                    "topics",
                    "TopicData",
                    "0+",
                    [
                        field("topic", "string", "0+"),
                        field("partitions", "[]int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)
