"""The cluster's failures, as josefk's own exception types.

Owns every exception that leaves ``josefk.cluster``: the metadata store's (etcd unreachable or
failing a request, a broker id in use) and the controller's decisions (a topic that exists, a
fenced controller, a bad assignment...). The etcd client's own exceptions never leave the
package: ``metadata_store`` turns each into ``MetadataStoreError`` where it calls the client,
so the broker catches josefk's types and never imports the etcd client.

Pure: imports nothing but the standard library, so a single-node broker (which maps these
to error codes in its handlers) never loads the etcd client.
"""

from __future__ import annotations

__all__ = [
    "BrokerIdInUseError",
    "ControllerFencedError",
    "EtcdUnavailableError",
    "HistoryCompactedError",
    "InvalidPartitionsError",
    "InvalidReplicaAssignmentError",
    "MetadataStoreError",
    "NoReassignmentInProgressError",
    "TopicExistsError",
    "UnknownTopicError",
]


class MetadataStoreError(Exception):
    """etcd did not carry out a request: unreachable, timed out, or it failed the request.
    Nothing was changed by a failed write's transaction; the caller may try again once etcd
    answers (a client request is answered with a retriable error)."""


class EtcdUnavailableError(MetadataStoreError):
    """No etcd endpoint answered."""


class HistoryCompactedError(MetadataStoreError):
    """A watch asked for revisions etcd has compacted away: read a fresh snapshot."""


class BrokerIdInUseError(Exception):
    """Another live broker holds this broker id."""


class ControllerFencedError(Exception):
    """Another broker became controller: this one's writes no longer apply."""


class TopicExistsError(Exception):
    """A topic of that name exists in the cluster."""


class UnknownTopicError(Exception):
    """The cluster has no topic of that name."""


class InvalidReplicaAssignmentError(ValueError):
    """An explicit replica assignment names unknown brokers, duplicates, or uneven sizes."""


class InvalidPartitionsError(ValueError):
    """A partition count that cannot be (not positive, or not more than the topic has)."""


class NoReassignmentInProgressError(Exception):
    """A reassignment was cancelled for a partition that is not moving."""
