"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31): the ACLs of the authorizer.

Without an authorizer every answer is SECURITY_DISABLED. Describing needs DESCRIBE on the
cluster, creating and deleting ALTER on it (CLUSTER_AUTHORIZATION_FAILED otherwise). A binding
or filter Kafka would refuse (an UNKNOWN or ANY code where a concrete one is needed, an empty
resource name, a principal not of the form Type:name, a cluster resource not named
``kafka-cluster``) is INVALID_REQUEST for that binding or filter alone; the others of the
request go ahead. Creations and deletions of one request are one change of the ACL store,
made durable before the answer.
"""

from __future__ import annotations

from josefk.broker.context import RequestContext
from josefk.broker.handlers import handles
from josefk.broker.security.authorizer import AclBinding, AclBindingFilter, InvalidAcl
from josefk.protocol.acls import AclOperation
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)

DescribeResponse = DescribeAclsResponse
CreateResponse = CreateAclsResponse
DeleteResponse = DeleteAclsResponse

_DISABLED = "No Authorizer is configured on the broker"
_CLUSTER_DENIED = "Cluster authorization failed"


def _filter_of(raw: DescribeAclsRequest | DeleteAclsRequest.DeleteAclsFilter) -> AclBindingFilter:
    return AclBindingFilter.of(
        raw.resource_type_filter,
        raw.resource_name_filter,
        raw.pattern_type_filter,
        raw.principal_filter,
        raw.host_filter,
        raw.operation,
        raw.permission_type,
    )


@handles(ApiKey.DESCRIBE_ACLS)
def handle_describe_acls(
    context: RequestContext, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    def refused(error: ErrorCode, message: str) -> DescribeAclsResponse:
        return DescribeResponse(
            throttle_time_ms=0, error_code=error, error_message=message, resources=[]
        )

    authorizer = context.broker.authorizer
    refusal = _refusal(context, authorizer, AclOperation.DESCRIBE)
    if refusal is not None:
        return refused(*refusal)
    assert authorizer is not None  # _refusal refuses without one
    try:
        acl_filter = _filter_of(request)
    except InvalidAcl as exc:
        return refused(ErrorCode.INVALID_REQUEST, str(exc))
    grouped: dict[tuple[int, str, int], list[DescribeAclsResponse.AclDescription]] = {}
    for binding in authorizer.matching(acl_filter):
        key = (int(binding.resource_type), binding.resource_name, int(binding.pattern_type))
        grouped.setdefault(key, []).append(
            DescribeResponse.AclDescription(
                principal=binding.principal,
                host=binding.host,
                operation=int(binding.operation),
                permission_type=int(binding.permission),
            )
        )
    resources = [
        DescribeResponse.DescribeAclsResource(
            resource_type=rtype, resource_name=name, pattern_type=ptype, acls=acls
        )
        for (rtype, name, ptype), acls in sorted(grouped.items())
    ]
    return DescribeResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, resources=resources
    )


def _refusal(
    context: RequestContext, configured: object | None, operation: AclOperation
) -> tuple[ErrorCode, str] | None:
    """Why a whole request is refused: no authorizer (``configured`` None), or no
    ``operation`` on the cluster for its principal; None to go ahead."""
    if configured is None:
        return ErrorCode.SECURITY_DISABLED, _DISABLED
    if not context.authorize_cluster(operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_DENIED
    return None


@handles(ApiKey.CREATE_ACLS)
async def handle_create_acls(
    context: RequestContext, request: CreateAclsRequest
) -> CreateAclsResponse:
    def answer(results: list[tuple[ErrorCode, str | None]]) -> CreateAclsResponse:
        return CreateResponse(
            throttle_time_ms=0,
            results=[
                CreateResponse.AclCreationResult(error_code=error, error_message=message)
                for error, message in results
            ],
        )

    store = context.broker.acl_store
    refusal = _refusal(context, store, AclOperation.ALTER)
    if refusal is not None:
        return answer([refusal] * len(request.creations))
    assert store is not None  # _refusal refuses without one
    results: list[tuple[ErrorCode, str | None]] = []
    valid: list[AclBinding] = []
    for creation in request.creations:
        try:
            binding = AclBinding.of(
                creation.resource_type,
                creation.resource_name,
                creation.resource_pattern_type,
                creation.principal,
                creation.host,
                creation.operation,
                creation.permission_type,
            )
        except InvalidAcl as exc:
            results.append((ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        valid.append(binding)
        results.append((ErrorCode.NONE, None))
    if valid:
        await store.update(lambda current: list(dict.fromkeys([*current, *valid])))
    return answer(results)


def _filter_result(
    error: ErrorCode, message: str | None, found: list[AclBinding] | None = None
) -> DeleteAclsResponse.DeleteAclsFilterResult:
    return DeleteResponse.DeleteAclsFilterResult(
        error_code=error,
        error_message=message,
        matching_acls=[
            DeleteResponse.DeleteAclsMatchingAcl(
                error_code=ErrorCode.NONE,
                error_message=None,
                resource_type=int(b.resource_type),
                resource_name=b.resource_name,
                pattern_type=int(b.pattern_type),
                principal=b.principal,
                host=b.host,
                operation=int(b.operation),
                permission_type=int(b.permission),
            )
            for b in found or ()
        ],
    )


@handles(ApiKey.DELETE_ACLS)
async def handle_delete_acls(
    context: RequestContext, request: DeleteAclsRequest
) -> DeleteAclsResponse:
    store = context.broker.acl_store
    refusal = _refusal(context, store, AclOperation.ALTER)
    if refusal is not None:
        return DeleteResponse(
            throttle_time_ms=0, filter_results=[_filter_result(*refusal) for _ in request.filters]
        )
    assert store is not None  # _refusal refuses without one
    filters: list[AclBindingFilter | str] = []
    for raw in request.filters:
        try:
            filters.append(_filter_of(raw))
        except InvalidAcl as exc:
            filters.append(str(exc))
    matched: list[list[AclBinding]] = [[] for _ in filters]

    def remove(current: list[AclBinding]) -> list[AclBinding]:
        # Run again if the store retries (a concurrent change in etcd): start afresh.
        deleted: set[AclBinding] = set()
        for i, acl_filter in enumerate(filters):
            found = (
                [b for b in current if acl_filter.matches(b)]
                if isinstance(acl_filter, AclBindingFilter)
                else []
            )
            matched[i] = found
            deleted.update(found)
        return [b for b in current if b not in deleted]

    if any(isinstance(f, AclBindingFilter) for f in filters):
        await store.update(remove)
    return DeleteResponse(
        throttle_time_ms=0,
        filter_results=[
            _filter_result(ErrorCode.INVALID_REQUEST, acl_filter)
            if isinstance(acl_filter, str)
            else _filter_result(ErrorCode.NONE, None, found)
            for acl_filter, found in zip(filters, matched, strict=True)
        ],
    )
