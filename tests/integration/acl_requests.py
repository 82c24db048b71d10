"""The ACL APIs' requests as the raw-protocol tests send them, with Kafka's wire codes written
out (the tests share no code with josefk's authorizer).

Owns ``acl_filter`` (DescribeAcls' request and DeleteAcls' filter: every ACL unless narrowed),
``acl_creation`` (one CreateAcls entry) and ``acl_api_errors`` (a DescribeAcls and a
CreateAcls on one connection: the errors of each). Imports josefk's protocol codec only.
"""

from __future__ import annotations

from typing import Any

from raw_client import RawClient

from josefk.protocol.api import ApiKey, request_class

# The filter code that matches every resource type, pattern type, operation and permission.
ANY = 1


def acl_filter(**fields: Any) -> dict[str, Any]:
    """The fields of DescribeAcls' request and of a DeleteAcls filter: ANY, with no name,
    principal or host (every ACL) except where ``fields`` say otherwise."""
    return {
        "resource_type_filter": ANY,
        "resource_name_filter": None,
        "pattern_type_filter": ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": ANY,
        "permission_type": ANY,
        **fields,
    }


def acl_creation(
    resource_type: int,
    resource_name: str,
    pattern_type: int,
    principal: str,
    operation: int,
    permission: int,
    host: str = "*",
) -> Any:
    """One CreateAcls entry (v3's AclCreation)."""
    return request_class(ApiKey.CREATE_ACLS).AclCreation(
        resource_type=resource_type,
        resource_name=resource_name,
        resource_pattern_type=pattern_type,
        principal=principal,
        host=host,
        operation=operation,
        permission_type=permission,
    )


def acl_api_errors(client: RawClient, creation: Any) -> tuple[int, list[int]]:
    """The error of a DescribeAcls of every ACL, and those of a CreateAcls of ``creation``."""
    described = client.call(ApiKey.DESCRIBE_ACLS, 3, **acl_filter())
    created = client.call(ApiKey.CREATE_ACLS, 3, creations=[creation])
    return described.error_code, [r.error_code for r in created.results]
