"""ElectLeaders (key 43): elect the preferred replica (or, unclean, any live replica) as leader
of the given partitions, all of them when the list is null.

KIP-460 introduced it, replacing the ZooKeeper-era preferred replica election; v1 adds the
election type and a top-level error; v2 is flexible (KIP-482).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=43,
    name="ElectLeaders",
    valid="0-2",
    flexible="2+",
    fields=[
        # 0: preferred replica, 1: unclean (any live replica, data may be lost).
        field("election_type", "int8", "1+", default=0),
        array(
            "topic_partitions",
            "TopicPartitions",
            "0+",
            [
                field("topic", "string", "0+"),
                field("partitions", "[]int32", "0+"),
            ],
            nullable="0+",
        ),
        field("timeout_ms", "int32", "0+", default=60000),
    ],
)

RESPONSE = response(
    api_key=43,
    name="ElectLeaders",
    valid="0-2",
    flexible="2+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("error_code", "int16", "1+", default=0),
        array(
            "replica_election_results",
            "ReplicaElectionResult",
            "0+",
            [
                field("topic", "string", "0+"),
                array(
                    "partition_result",
                    "PartitionResult",
                    "0+",
                    [
                        field("partition_id", "int32", "0+"),
                        field("error_code", "int16", "0+"),
                        field("error_message", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)
