"""The codes ACL APIs carry on the wire: resource types, pattern types, operations and
permission types, with the names Kafka's tools print and accept.

Owns the four ``IntEnum``s (values are Kafka's wire codes, KIP-140/KIP-290) and
``parse_code`` (a name such as ``describe-configs`` or ``DescribeConfigs`` to its code), used by
the broker's authorizer, the admin client and the CLI alike. Imports the standard library
only.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final, TypeVar

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "parse_code",
]

# The one name a CLUSTER resource has (Kafka's ``kafka-cluster``).
CLUSTER_NAME: Final = "kafka-cluster"
# A LITERAL resource name that matches every name of its type, and the host that matches
# every host.
WILDCARD: Final = "*"
WILDCARD_PRINCIPAL: Final = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, the name compared exactly
    MATCH = 2  # filters only: every binding that would apply to the named resource
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


_E = TypeVar("_E", bound=IntEnum)


def parse_code(kind: type[_E], text: str) -> _E:
    """``describe-configs``, ``DESCRIBE_CONFIGS`` or ``DescribeConfigs`` -> the member;
    ``ValueError`` naming the choices otherwise."""
    wanted = text.strip().replace("-", "").replace("_", "").upper()
    for member in kind:
        if member.name.replace("_", "") == wanted:
            return member
    choices = ", ".join(m.name for m in kind if m.name != "UNKNOWN")
    raise ValueError(f"unknown {kind.__name__} {text!r}; one of {choices}")
