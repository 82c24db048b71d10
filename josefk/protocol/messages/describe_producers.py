"""DescribeProducers (key 61): the active producers of partitions, for hanging-transaction
diagnosis (KIP-664). A single version, flexible from the start.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=61,
    name="DescribeProducers",
    valid="0",
    flexible="0+",
    fields=[
        array(
            "topics",
            "TopicRequest",
            "0+",
            [
                field("name", "string", "0+"),
                field("partition_indexes", "[]int32", "0+"),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=61,
    name="DescribeProducers",
    valid="0",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        array(
            "topics",
            "TopicResponse",
            "0+",
            [
                field("name", "string", "0+"),
                array(
                    "partitions",
                    "PartitionResponse",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("error_code", "int16", "0+"),
                        field("error_message", "string", "0+", nullable="0+", default=None),
                        array(
                            "active_producers",
                            "ProducerState",
                            "0+",
                            [
                                field("producer_id", "int64", "0+"),
                                # int32 here, unlike the int16 epoch elsewhere; as in Kafka.
                                field("producer_epoch", "int32", "0+"),
                                field("last_sequence", "int32", "0+", default=-1),
                                field("last_timestamp", "int64", "0+", default=-1),
                                field("coordinator_epoch", "int32", "0+"),
                                field("current_txn_start_offset", "int64", "0+", default=-1),
                            ],
                        ),
                    ],
                ),
            ],
        ),
    ],
)
