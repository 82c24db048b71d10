"""CreateTopics (key 19): create topics from a partition count and replication factor, or from
explicit replica assignments, with topic configs; ``validate_only`` checks without creating.

KIP-4 introduced it; KIP-464 (v4) lets -1 ask for the broker's default partitions and
replication factor; v5 is flexible and, with KIP-525, echoes the created topic's partitions,
replication factor and configs; KIP-599 (v6) may answer THROTTLING_QUOTA_EXCEEDED; KIP-516
(v7) returns the topic id. KIP-896 removed v0-1 in Kafka 4.0.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=19,
    name="CreateTopics",
    valid="2-7",
    flexible="5+",
    fields=[
        array(
            "topics",
            "CreatableTopic",
            "2+",
            [
                field("name", "string", "2+"),
                # -1 (v4+) means "the broker's num.partitions / default.replication.factor".
                field("num_partitions", "int32", "2+"),
                field("replication_factor", "int16", "2+"),
                array(
                    "assignments",
                    "CreatableReplicaAssignment",
                    "2+",
                    [
                        field("partition_index", "int32", "2+"),
                        field("broker_ids", "[]int32", "2+"),
                    ],
                ),
                array(
                    "configs",
                    "CreatableTopicConfig",
                    "2+",
                    [
                        field("name", "string", "2+"),
                        field("value", "string", "2+", nullable="2+"),
                    ],
                ),
            ],
        ),
        field("timeout_ms", "int32", "2+", default=60000),
        field("validate_only", "bool", "2+", default=False),
    ],
)

RESPONSE = response(
    api_key=19,
    name="CreateTopics",
    valid="2-7",
    flexible="5+",
    fields=[
        field("throttle_time_ms", "int32", "2+", ignorable=True),
        array(
            "topics",
            "CreatableTopicResult",
            "2+",
            [
                field("name", "string", "2+"),
                field("topic_id", "uuid", "7+", ignorable=True),
                field("error_code", "int16", "2+"),
                field("error_message", "string", "2+", nullable="2+", ignorable=True),
                field(
                    "topic_config_error_code",
                    "int16",
                    "5+",
                    tag=0,
                    tagged="5+",
                    ignorable=True,
                ),
                field("num_partitions", "int32", "5+", default=-1, ignorable=True),
                field("replication_factor", "int16", "5+", default=-1, ignorable=True),
                array(
                    "configs",
                    "CreatableTopicConfigs",
                    "5+",
                    [
                        field("name", "string", "5+"),
                        field("value", "string", "5+", nullable="5+"),
                        field("read_only", "bool", "5+"),
                        field("config_source", "int8", "5+", default=-1, ignorable=True),
                        field("is_sensitive", "bool", "5+"),
                    ],
                    nullable="5+",
                    ignorable=True,
                ),
            ],
        ),
    ],
)
