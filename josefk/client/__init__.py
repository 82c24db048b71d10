"""josefk's own asyncio Kafka client: producer, consumer and admin.

Built on josefk.protocol and josefk.records only; never imports josefk.storage or
josefk.broker. The public API:

* ``AIOProducer`` (``ProducerConfig``): ``await send(topic, value, key, partition=,
  timestamp_ms=, headers=)`` -> delivery future of ``RecordMetadata``; ``send_nowait``,
  ``send_and_wait``, ``flush``, ``close``. Idempotent by default when the broker allows.
  With ``transactional_id``: ``init_transactions``, ``begin_transaction``,
  ``send_offsets_to_transaction``, ``commit_transaction``, ``abort_transaction``.
* ``AIOConsumer`` (``ConsumerConfig``): ``assign``, ``subscribe`` (with ``group_id``),
  ``seek`` / ``seek_to_beginning`` / ``seek_to_end`` / ``seek_to_timestamp``, ``getmany``,
  ``getone``, ``async for record in consumer``, ``commit`` / ``commit_async``,
  ``committed``, ``position``, ``beginning_offsets`` / ``end_offsets`` /
  ``offsets_for_times``, ``pause`` / ``resume``, ``group_metadata``;
  ``ConsumerRebalanceListener``; ``isolation_level="read_committed"``.
* ``AIOAdmin``: topics (create/delete/describe/list, partitions), configs (describe,
  incremental alter), groups (list/describe/delete, list/alter/reset offsets), list offsets,
  describe cluster, delete records, leader election, partition reassignment, log dirs,
  transactions (list/describe) and producers (describe).
* ``errors``: ``KafkaError`` (``.code``, ``.name``, ``.retriable``) and a subclass per Kafka
  error code.
* ``josefk.client.sync``: blocking ``Producer``, ``Consumer``, ``ShareConsumer`` and ``Admin``
  for scripts.

The names are imported on first use (``__getattr__``): a process that needs only part of the
package, as the broker needs ``josefk.client.connection`` for its inter-broker calls, does not
pay for the producer, consumer and admin modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from josefk.client.admin import (
        AIOAdmin,
        AlterConfigOp,
        ClusterDescription,
        ConfigEntry,
        ConfigSource,
        ConfigSynonym,
        GroupDescription,
        GroupListing,
        LogDirDescription,
        NewTopic,
        PartitionReassignment,
        ProducerState,
        ResourceType,
        TopicDescription,
        TransactionDescription,
        TransactionListing,
    )
    from josefk.client.assignors import RangeAssignor, RoundRobinAssignor
    from josefk.client.cluster import ClientConfig, KafkaClient
    from josefk.client.consumer import AIOConsumer, ConsumerConfig
    from josefk.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
    from josefk.client.partitioner import DefaultPartitioner, murmur2, partition_for_key
    from josefk.client.producer import AIOProducer, ProducerConfig
    from josefk.client.subscription import ConsumerRebalanceListener
    from josefk.client.transactions import (
        PreparedTransaction,
        TransactionState,
        complete_transaction,
    )
    from josefk.client.types import (
        ConsumerGroupMetadata,
        ConsumerRecord,
        OffsetAndTimestamp,
        RecordMetadata,
        TopicPartition,
    )
    from josefk.records import Compression, TimestampType

# Each public name -> the module that defines it.
_MODULE_OF: dict[str, str] = {
    "AIOAdmin": "josefk.client.admin",
    "AIOConsumer": "josefk.client.consumer",
    "AIOProducer": "josefk.client.producer",
    "AlterConfigOp": "josefk.client.admin",
    "ClientConfig": "josefk.client.cluster",
    "ClusterDescription": "josefk.client.admin",
    "Compression": "josefk.records",
    "ConfigEntry": "josefk.client.admin",
    "ConfigSource": "josefk.client.admin",
    "ConfigSynonym": "josefk.client.admin",
    "ConsumerConfig": "josefk.client.consumer",
    "ConsumerGroupMetadata": "josefk.client.types",
    "ConsumerRebalanceListener": "josefk.client.subscription",
    "ConsumerRecord": "josefk.client.types",
    "DefaultPartitioner": "josefk.client.partitioner",
    "GroupDescription": "josefk.client.admin",
    "GroupListing": "josefk.client.admin",
    "KafkaClient": "josefk.client.cluster",
    "KafkaConnectionError": "josefk.client.errors",
    "KafkaError": "josefk.client.errors",
    "KafkaTimeoutError": "josefk.client.errors",
    "LogDirDescription": "josefk.client.admin",
    "NewTopic": "josefk.client.admin",
    "OffsetAndTimestamp": "josefk.client.types",
    "PartitionReassignment": "josefk.client.admin",
    "PreparedTransaction": "josefk.client.transactions",
    "ProducerConfig": "josefk.client.producer",
    "ProducerState": "josefk.client.admin",
    "RangeAssignor": "josefk.client.assignors",
    "RecordMetadata": "josefk.client.types",
    "ResourceType": "josefk.client.admin",
    "RoundRobinAssignor": "josefk.client.assignors",
    "TimestampType": "josefk.records",
    "TopicDescription": "josefk.client.admin",
    "TopicPartition": "josefk.client.types",
    "TransactionDescription": "josefk.client.admin",
    "TransactionListing": "josefk.client.admin",
    "TransactionState": "josefk.client.transactions",
    "complete_transaction": "josefk.client.transactions",
    "murmur2": "josefk.client.partitioner",
    "partition_for_key": "josefk.client.partitioner",
}

__all__ = [
    "AIOAdmin",
    "AIOConsumer",
    "AIOProducer",
    "AlterConfigOp",
    "ClientConfig",
    "ClusterDescription",
    "Compression",
    "ConfigEntry",
    "ConfigSource",
    "ConfigSynonym",
    "ConsumerConfig",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "DefaultPartitioner",
    "GroupDescription",
    "GroupListing",
    "KafkaClient",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "LogDirDescription",
    "NewTopic",
    "OffsetAndTimestamp",
    "PartitionReassignment",
    "PreparedTransaction",
    "ProducerConfig",
    "ProducerState",
    "RangeAssignor",
    "RecordMetadata",
    "ResourceType",
    "RoundRobinAssignor",
    "TimestampType",
    "TopicDescription",
    "TopicPartition",
    "TransactionDescription",
    "TransactionListing",
    "TransactionState",
    "complete_transaction",
    "murmur2",
    "partition_for_key",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
