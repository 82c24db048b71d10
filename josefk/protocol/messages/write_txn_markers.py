"""WriteTxnMarkers (key 27): the transaction coordinator asks partition leaders to write
commit or abort markers.

v0 was removed in Kafka 4.0, v1 is flexible (KIP-482) and the 4.0 baseline, v2 carries the
transaction version so leaders can validate TV2 markers (KIP-1228).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=27,
    name="WriteTxnMarkers",
    valid="1-2",
    flexible="1+",
    fields=[
        array(
            "markers",
            "WritableTxnMarker",
            "0+",
            [
                field("producer_id", "int64", "0+"),
                field("producer_epoch", "int16", "0+"),
                field("transaction_result", "bool", "0+"),
                array(
                    "topics",
                    "WritableTxnMarkerTopic",
                    "0+",
                    [
                        field("name", "string", "0+"),
                        field("partition_indexes", "[]int32", "0+"),
                    ],
                ),
                field("coordinator_epoch", "int32", "0+"),
                field("transaction_version", "int8", "2+", default=0, ignorable=True),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=27,
    name="WriteTxnMarkers",
    valid="1-2",
    flexible="1+",
    fields=[
        array(
            "markers",
            "WritableTxnMarkerResult",
            "0+",
            [
                field("producer_id", "int64", "0+"),
                array(
                    "topics",
                    "WritableTxnMarkerTopicResult",
                    "0+",
                    [
                        field("name", "string", "0+"),
                        array(
                            "partitions",
                            "WritableTxnMarkerPartitionResult",
                            "0+",
                            [
                                field("partition_index", "int32", "0+"),
                                field("error_code", "int16", "0+"),
                            ],
                        ),
                    ],
                ),
            ],
        ),
    ],
)
