"""DescribeCluster (60) and DescribeLogDirs (35): the broker and its log directories.

DescribeLogDirs needs DESCRIBE on the cluster. DescribeCluster needs nothing; the cluster's
authorized operations (KIP-430) are the principal's bit field when asked for and it may
DESCRIBE the cluster, 0 when it may not, Kafka's "not requested" marker otherwise.
"""

from __future__ import annotations

import os

from josefk.broker.context import RequestContext
from josefk.broker.handlers import handles
from josefk.protocol.acls import CLUSTER_NAME, AclOperation, ResourceType
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)

ClusterResponse = DescribeClusterResponse
ClusterBroker = ClusterResponse.DescribeClusterBroker
LogDirsResponse = DescribeLogDirsResponse
LogDirResult = LogDirsResponse.DescribeLogDirsResult
LogDirTopic = LogDirResult.DescribeLogDirsTopic
LogDirPartition = LogDirTopic.DescribeLogDirsPartition

_NO_OPERATIONS = -(2**31)
_BROKERS_ENDPOINT = 1


@handles(ApiKey.DESCRIBE_CLUSTER)
def handle_describe_cluster(
    context: RequestContext, request: DescribeClusterRequest
) -> DescribeClusterResponse:
    broker = context.broker
    metadata = broker.metadata
    assert metadata is not None
    if context.api_version >= 1 and request.endpoint_type not in (_BROKERS_ENDPOINT,):
        return ClusterResponse(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="josefk serves the brokers endpoint type only",
            endpoint_type=request.endpoint_type,
            cluster_id=broker.cluster_id,
            controller_id=-1,
        )
    return ClusterResponse(
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=_BROKERS_ENDPOINT,
        cluster_id=broker.cluster_id,
        controller_id=metadata.controller_id,
        brokers=[
            ClusterBroker(broker_id=node.broker_id, host=node.host, port=node.port, rack=node.rack)
            for node in metadata.brokers(context.connection.listener_name)
        ],
        cluster_authorized_operations=_cluster_operations(context, request),
    )


def _cluster_operations(context: RequestContext, request: DescribeClusterRequest) -> int:
    if not request.include_cluster_authorized_operations:
        return _NO_OPERATIONS
    if not context.authorize_cluster(AclOperation.DESCRIBE):
        return 0
    return context.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)


@handles(ApiKey.DESCRIBE_LOG_DIRS)
def handle_describe_log_dirs(
    context: RequestContext, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    if not context.authorize_cluster(AclOperation.DESCRIBE):
        # Kafka answers an empty result (v3+ with the error; older versions cannot say why).
        return LogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
    replicas = context.broker.replica_manager
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list[DescribeLogDirsResponse.DescribeLogDirsPartition]]] = {
        d: {} for d in context.broker.log_dirs
    }
    offline: set[str] = set()
    for partition in replicas.partitions():
        tp = partition.tp
        if wanted is not None and (tp.topic, tp.partition) not in wanted:
            continue
        log = partition.log
        log_dir = str(log.parent_dir)
        if log.is_offline:
            offline.add(log_dir)
            continue
        by_dir.setdefault(log_dir, {}).setdefault(tp.topic, []).append(
            LogDirPartition(
                partition_index=tp.partition,
                partition_size=log.size(),
                offset_lag=0,
                is_future_key=False,
            )
        )
    results = []
    for log_dir, topics in by_dir.items():
        total, usable = _disk_space(log_dir)
        results.append(
            LogDirResult(
                error_code=ErrorCode.KAFKA_STORAGE_ERROR if log_dir in offline else ErrorCode.NONE,
                log_dir=os.path.abspath(log_dir),
                topics=[
                    LogDirTopic(name=name, partitions=partitions)
                    for name, partitions in sorted(topics.items())
                ],
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return LogDirsResponse(error_code=ErrorCode.NONE, results=results)


def _disk_space(path: str) -> tuple[int, int]:
    try:
        stats = os.statvfs(path)
    except OSError:
        return -1, -1
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
