"""DeleteRecords (key 21): raise partitions' log start offset, dropping the records before it;
an offset of -1 means "up to the high watermark".

KIP-107 introduced it (KIP-204 put it in the admin client); v1 answers before throttling,
v2 is flexible (KIP-482). Kafka 4.0 still accepts v0.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=21,
    name="DeleteRecords",
    valid="0-2",
    flexible="2+",
    fields=[
        array(
            "topics",
            "DeleteRecordsTopic",
            "0+",
            [
                field("name", "string", "0+"),
                array(
                    "partitions",
                    "DeleteRecordsPartition",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("offset", "int64", "0+"),
                    ],
                ),
            ],
        ),
        field("timeout_ms", "int32", "0+"),
    ],
)

RESPONSE = response(
    api_key=21,
    name="DeleteRecords",
    valid="0-2",
    flexible="2+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        array(
            "topics",
            "DeleteRecordsTopicResult",
            "0+",
            [
                field("name", "string", "0+"),
                array(
                    "partitions",
                    "DeleteRecordsPartitionResult",
                    "0+",
                    [
                        field("partition_index", "int32", "0+"),
                        field("low_watermark", "int64", "0+"),
                        field("error_code", "int16", "0+"),
                    ],
                ),
            ],
        ),
    ],
)
