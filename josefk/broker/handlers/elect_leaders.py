"""ElectLeaders: move leadership to each partition's preferred replica (election type 0), or
give a leaderless partition any live replica (type 1, unclean: it may lose acknowledged data).

In a cluster the controller does it (a broker that is not the controller answers
NOT_CONTROLLER, and the client finds the controller in Metadata); per partition the answer is
ELECTION_NOT_NEEDED when the wanted leader already leads, PREFERRED_LEADER_NOT_AVAILABLE when
the preferred replica is dead or out of sync, ELIGIBLE_LEADERS_NOT_AVAILABLE when an unclean
election finds no live replica. The single node leads everything it has: nothing to elect.

Imports josefk.cluster's errors (the cluster node only for its type); must not import the network layer.
"""

from __future__ import annotations

import logging
from typing import Final

from josefk.broker.context import RequestContext
from josefk.broker.handlers import handles
from josefk.cluster.errors import ControllerFencedError
from josefk.protocol.acls import AclOperation
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import ElectLeadersRequest, ElectLeadersResponse

logger = logging.getLogger(__name__)

ELECT_LEADERS: Final = ElectLeadersResponse
PREFERRED: Final = 0
UNCLEAN: Final = 1


def _answer(
    version: int, results: dict[tuple[str, int], ErrorCode], top: ErrorCode = ErrorCode.NONE
) -> ElectLeadersResponse:
    by_topic: dict[str, list[ElectLeadersResponse.PartitionResult]] = {}
    for (topic, partition), error in sorted(results.items()):
        by_topic.setdefault(topic, []).append(
            ELECT_LEADERS.PartitionResult(
                partition_id=partition,
                error_code=error,
                error_message=error.message if error else None,
            )
        )
    return ELECT_LEADERS(
        error_code=top if version >= 1 else ErrorCode.NONE,
        replica_election_results=[
            ELECT_LEADERS.ReplicaElectionResult(topic=topic, partition_result=partitions)
            for topic, partitions in by_topic.items()
        ],
    )


def _wanted(request: ElectLeadersRequest, known: list[tuple[str, int]]) -> list[tuple[str, int]]:
    if request.topic_partitions is None:
        return known
    return [(t.topic, p) for t in request.topic_partitions for p in t.partitions]


@handles(ApiKey.ELECT_LEADERS)
async def handle_elect_leaders(
    context: RequestContext, request: ElectLeadersRequest
) -> ElectLeadersResponse:
    if not context.authorize_cluster(AclOperation.ALTER):
        return context.refuse_as(
            ElectLeadersResponse, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        )
    version = context.api_version
    election = request.election_type if version >= 1 else PREFERRED
    node = context.broker.cluster
    if node is None:
        replicas = context.broker.replica_manager
        known = [(p.tp.topic, p.tp.partition) for p in replicas.partitions()]
        return _answer(
            version,
            {
                key: ErrorCode.ELECTION_NOT_NEEDED
                if replicas.get_partition(*key) is not None
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                for key in _wanted(request, known)
            },
        )
    controller = node.controller
    if controller is None:
        return _answer(version, {}, ErrorCode.NOT_CONTROLLER)
    if election not in (PREFERRED, UNCLEAN):
        return _answer(version, {}, ErrorCode.INVALID_REQUEST)
    # Decided on etcd as it is now, not on this broker's watched view: an election this
    # controller wrote a moment ago may not have come back through its watch yet, and a
    # second request would elect again (NONE) instead of ELECTION_NOT_NEEDED.
    view = await controller.store.snapshot()
    live = set(view.brokers)
    results: dict[tuple[str, int], ErrorCode] = {}
    to_elect: list[tuple[str, int]] = []
    for key in _wanted(request, sorted(view.partitions)):
        versioned = view.partitions.get(key)
        if versioned is None:
            results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        state = versioned.state
        if election == PREFERRED:
            preferred = state.replicas[0]
            if state.leader == preferred:
                results[key] = ErrorCode.ELECTION_NOT_NEEDED
            elif preferred not in live or preferred not in state.isr:
                results[key] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            else:
                to_elect.append(key)
        elif state.leader in live:
            results[key] = ErrorCode.ELECTION_NOT_NEEDED
        elif not any(b in live for b in state.replicas):
            results[key] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        else:
            to_elect.append(key)
    if to_elect:
        try:
            if election == PREFERRED:
                done = await controller.elect_preferred_leaders(live, to_elect)
                failed = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            else:
                done = await controller.elect_unclean_leaders(live, to_elect)
                failed = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        except ControllerFencedError:
            return _answer(version, {}, ErrorCode.NOT_CONTROLLER)
        for key in to_elect:
            results[key] = ErrorCode.NONE if done.get(key) else failed
    return _answer(version, results)
