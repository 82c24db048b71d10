"""The admin client's controller-bound requests retry NOT_CONTROLLER on fresh metadata.

Right after the controller moves, a broker's Metadata may still name the old one, which
answers NOT_CONTROLLER; Kafka's admin client asks again after a metadata refresh, and so must
josefk's (seen: ``josefk cluster elect-leaders`` failing right after the controller
restarted). A fault path: the client's transport is a script here, the real cluster path is
tests/cluster/test_elect_leaders_cluster.py.
"""

from __future__ import annotations

from typing import Any

from josefk.client.admin import AIOAdmin
from josefk.client.cluster import BrokerInfo, ClusterMetadata
from josefk.client.types import TopicPartition
from josefk.protocol import ApiKey, ErrorCode
from josefk.protocol.message_types import CreateTopicsResponse, ElectLeadersResponse

NOT_CONTROLLER = ErrorCode.NOT_CONTROLLER


class ScriptedClient:
    """What ``AIOAdmin`` uses of its KafkaClient: Metadata names controller 1 until it is
    refreshed after an ``invalidate``, then 2; only broker 2 is the controller."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.config = type("Config", (), {"clock": staticmethod(lambda: 0.0)})()
        self.controller = 1
        self.asked: list[int] = []

    async def ensure_metadata(self) -> ClusterMetadata:
        brokers = {n: BrokerInfo(n, "127.0.0.1", 9000 + n) for n in (1, 2)}
        return ClusterMetadata(controller_id=self.controller, brokers=brokers)

    def invalidate(self) -> None:
        self.controller = 2

    def least_loaded_node(self) -> int:
        return 1

    def _retry_backoff_s(self, attempt: int) -> float:
        return 0.0

    async def request(self, node_id: int, api_key: int, body: Any) -> Any:
        self.asked.append(node_id)
        return self.answer(node_id)


def _admin(client: ScriptedClient) -> AIOAdmin:
    admin = AIOAdmin(bootstrap_servers="127.0.0.1:9")
    admin._client = client  # type: ignore[assignment]
    return admin


async def test_elect_leaders_asks_the_new_controller_after_not_controller() -> None:
    def answer(node_id: int) -> ElectLeadersResponse:
        Result = ElectLeadersResponse.ReplicaElectionResult
        if node_id != 2:
            return ElectLeadersResponse(
                throttle_time_ms=0, error_code=NOT_CONTROLLER, replica_election_results=[]
            )
        return ElectLeadersResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            replica_election_results=[
                Result(
                    topic="t",
                    partition_result=[
                        Result.PartitionResult(partition_id=0, error_code=0, error_message=None)
                    ],
                )
            ],
        )

    client = ScriptedClient(answer)
    result = await _admin(client).elect_leaders([TopicPartition("t", 0)])
    assert result == {TopicPartition("t", 0): None}
    assert client.asked == [1, 2]


async def test_create_topics_retries_when_every_topic_says_not_controller() -> None:
    def answer(node_id: int) -> CreateTopicsResponse:
        code = NOT_CONTROLLER if node_id != 2 else ErrorCode.NONE
        return CreateTopicsResponse(
            throttle_time_ms=0,
            topics=[
                CreateTopicsResponse.CreatableTopicResult(
                    name="t",
                    topic_id=None,
                    error_code=code,
                    error_message=None,
                    topic_config_error_code=0,
                    num_partitions=1,
                    replication_factor=1,
                    configs=None,
                )
            ],
        )

    client = ScriptedClient(answer)
    assert await _admin(client).create_topics(["t"]) == {"t": None}
    assert client.asked == [1, 2]


async def test_not_controller_past_the_timeout_is_the_answer() -> None:
    def answer(node_id: int) -> ElectLeadersResponse:
        return ElectLeadersResponse(
            throttle_time_ms=0, error_code=NOT_CONTROLLER, replica_election_results=[]
        )

    client = ScriptedClient(answer)
    admin = _admin(client)
    response = await admin._to_controller(ApiKey.ELECT_LEADERS, None, timeout_ms=0)
    assert response.error_code == NOT_CONTROLLER
    assert client.asked == [1]
