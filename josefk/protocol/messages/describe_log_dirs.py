"""DescribeLogDirs (key 35): a broker's log directories, the partitions each holds with their
size and lag, and (v4+) the volume's total and usable bytes.

KIP-113 introduced it; v1 answers before throttling; v2 is flexible (KIP-482); KIP-784 (v3)
adds a top-level error code; KIP-827 (v4) adds total and usable bytes; KIP-1066 (v5, Kafka
4.3) says whether a log directory is cordoned. KIP-896 removed v0 in Kafka 4.0.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=35,
    name="DescribeLogDirs",
    valid="1-5",
    flexible="2+",
    fields=[
        # Null asks for every partition on the broker.
        array(
            "topics",
            "DescribableLogDirTopic",
            "1+",
            [
                field("topic", "string", "1+"),
                field("partitions", "[]int32", "1+"),
            ],
            nullable="1+",
        ),
    ],
)

RESPONSE = response(
    api_key=35,
    name="DescribeLogDirs",
    valid="1-5",
    flexible="2+",
    fields=[
        field("throttle_time_ms", "int32", "1+"),
        field("error_code", "int16", "3+", ignorable=True),
        array(
            "results",
            "DescribeLogDirsResult",
            "1+",
            [
                field("error_code", "int16", "1+"),
                field("log_dir", "string", "1+"),
                array(
                    "topics",
                    "DescribeLogDirsTopic",
                    "1+",
                    [
                        field("name", "string", "1+"),
                        array(
                            "partitions",
                            "DescribeLogDirsPartition",
                            "1+",
                            [
                                field("partition_index", "int32", "1+"),
                                field("partition_size", "int64", "1+"),
                                field("offset_lag", "int64", "1+"),
                                field("is_future_key", "bool", "1+"),
                            ],
                        ),
                    ],
                ),
                # -1 when the broker could not read the volume's size.
                field("total_bytes", "int64", "4+", default=-1, ignorable=True),
                field("usable_bytes", "int64", "4+", default=-1, ignorable=True),
                field("is_cordoned", "bool", "5+", default=False, ignorable=True),
            ],
        ),
    ],
)
