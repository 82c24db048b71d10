"""AddPartitionsToTxn (key 24): register partitions in a producer's ongoing transaction.

v2 may return PRODUCER_FENCED (KIP-588), v3 is flexible (KIP-482); v4 (KIP-890) batches several
transactions for broker-to-coordinator verification and renames the single-transaction fields of
v0-v3 to ``v3_and_below_*``; v5 may return TRANSACTION_ABORTABLE (KIP-890).
"""

from josefk.protocol.schema import Field, array, field, request, response


def _topics(name: str, versions: str) -> Field:
    return array(
        name,
        "AddPartitionsToTxnTopic",
        versions,
        [
            field("name", "string", "0+"),
            field("partitions", "[]int32", "0+"),
        ],
    )


def _topic_results(name: str, versions: str) -> Field:
    return array(
        name,
        "AddPartitionsToTxnTopicResult",
        versions,
        [
            field("name", "string", "0+"),
            array(
                "results_by_partition",
                "AddPartitionsToTxnPartitionResult",
                "0+",
                [
                    field("partition_index", "int32", "0+"),
                    field("partition_error_code", "int16", "0+"),
                ],
            ),
        ],
    )


REQUEST = request(
    api_key=24,
    name="AddPartitionsToTxn",
    valid="0-5",
    flexible="3+",
    fields=[
        array(
            "transactions",
            "AddPartitionsToTxnTransaction",
            "4+",
            [
                field("transactional_id", "string", "4+"),
                field("producer_id", "int64", "4+"),
                field("producer_epoch", "int16", "4+"),
                field("verify_only", "bool", "4+", default=False),
                _topics("topics", "4+"),
            ],
        ),
        field("v3_and_below_transactional_id", "string", "0-3"),
        field("v3_and_below_producer_id", "int64", "0-3"),
        field("v3_and_below_producer_epoch", "int16", "0-3"),
        _topics("v3_and_below_topics", "0-3"),
    ],
)

RESPONSE = response(
    api_key=24,
    name="AddPartitionsToTxn",
    valid="0-5",
    flexible="3+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("error_code", "int16", "4+", ignorable=True),
        array(
            "results_by_transaction",
            "AddPartitionsToTxnResult",
            "4+",
            [
                field("transactional_id", "string", "4+"),
                _topic_results("topic_results", "4+"),
            ],
        ),
        _topic_results("results_by_topic_v3_and_below", "0-3"),
    ],
)
