"""Metadata (key 3): brokers, controller, cluster id, and topics with their partitions.

Versions 0-13, flexible from 9. v1 adds rack, controller id, is_internal and a nullable topic
list (null = all topics), v2 the cluster id, v3 throttle time, v4 allow_auto_topic_creation,
v5 offline replicas, v7 leader epoch (KIP-320), v8 authorized operations (KIP-430; the
cluster-level flag lives in 8-10 only, DescribeCluster took it over), v10 topic ids
(KIP-516, topic name nullable in the request), v12 nullable topic names in the response,
v13 a top-level error code (KIP-1102, REBOOTSTRAP_REQUIRED).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=3,
    name="Metadata",
    valid="0-13",
    flexible="9+",
    fields=[
        array(
            "topics",
            "MetadataRequestTopic",
            "0+",
            [
                field("topic_id", "uuid", "10+", ignorable=True),
                field("name", "string", "0+", nullable="10+"),
            ],
            nullable="1+",
        ),
        field("allow_auto_topic_creation", "bool", "4+", default=True),
        field("include_cluster_authorized_operations", "bool", "8-10"),
        field("include_topic_authorized_operations", "bool", "8+"),
    ],
)

RESPONSE = response(
    api_key=3,
    name="Metadata",
    valid="0-13",
    flexible="9+",
    fields=[
        field("throttle_time_ms", "int32", "3+", ignorable=True),
        array(
            "brokers",
            "MetadataResponseBroker",
            "0+",
            [
                field("node_id", "int32", "0+"),
                field("host", "string", "0+"),
                field("port", "int32", "0+"),
                field("rack", "string", "1+", nullable="1+", default=None, ignorable=True),
            ],
        ),
        field("cluster_id", "string", "2+", nullable="2+", default=None, ignorable=True),
        field("controller_id", "int32", "1+", default=-1, ignorable=True),
        array(
            "topics",
            "MetadataResponseTopic",
            "0+",
            [
                field("error_code", "int16", "0+"),
                field("name", "string", "0+", nullable="12+"),
                field("topic_id", "uuid", "10+", ignorable=True),
                field("is_internal", "bool", "1+", default=False, ignorable=True),
                array(
                    "partitions",
                    "MetadataResponsePartition",
                    "0+",
                    [
                        field("error_code", "int16", "0+"),
                        field("partition_index", "int32", "0+"),
                        field("leader_id", "int32", "0+"),
                        field("leader_epoch", "int32", "7+", default=-1, ignorable=True),
                        field("replica_nodes", "[]int32", "0+"),
                        field("isr_nodes", "[]int32", "0+"),
                        field("offline_replicas", "[]int32", "5+", ignorable=True),
                    ],
                ),
                field("topic_authorized_operations", "int32", "8+", default=-2147483648),
            ],
        ),
        field("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
        field("error_code", "int16", "13+", ignorable=True),
    ],
)
