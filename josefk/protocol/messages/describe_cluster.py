"""DescribeCluster (key 60): cluster id, controller and brokers (or controllers) for admin
clients, without a full Metadata request.

KIP-700 introduced it, flexible from v0; KIP-919 (v1) adds the endpoint type (1 brokers,
2 controllers); KIP-1073 (v2, Kafka 4.0) can include fenced brokers and flags them.
"""

from josefk.protocol.schema import array, field, request, response

# INT32_MIN: "authorized operations were not requested".
_OPERATIONS_NOT_REQUESTED = -(2**31)

REQUEST = request(
    api_key=60,
    name="DescribeCluster",
    valid="0-2",
    flexible="0+",
    fields=[
        field("include_cluster_authorized_operations", "bool", "0+"),
        field("endpoint_type", "int8", "1+", default=1),
        field("include_fenced_brokers", "bool", "2+", default=False),
    ],
)

RESPONSE = response(
    api_key=60,
    name="DescribeCluster",
    valid="0-2",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("error_code", "int16", "0+"),
        field("error_message", "string", "0+", nullable="0+", default=None),
        field("endpoint_type", "int8", "1+", default=1),
        field("cluster_id", "string", "0+"),
        field("controller_id", "int32", "0+", default=-1),
        array(
            "brokers",
            "DescribeClusterBroker",
            "0+",
            [
                field("broker_id", "int32", "0+"),
                field("host", "string", "0+"),
                field("port", "int32", "0+"),
                field("rack", "string", "0+", nullable="0+", default=None),
                field("is_fenced", "bool", "2+", default=False),
            ],
        ),
        field("cluster_authorized_operations", "int32", "0+", default=_OPERATIONS_NOT_REQUESTED),
    ],
)
