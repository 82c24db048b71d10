"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): SCRAM users (KIP-554).

Describe names the mechanisms and iteration counts a user has, never a key. Alter applies one
user's deletions and upsertions together or not at all: a user named twice for the same
mechanism (DUPLICATE_RESOURCE), an unknown mechanism (UNSUPPORTED_SASL_MECHANISM), an empty
name or an iteration count outside 4096-16384 (UNACCEPTABLE_CREDENTIAL), or deleting a
credential that does not exist (RESOURCE_NOT_FOUND) fails that user only. Changes are written
to the credential file before the answer. With an authorizer, describing needs DESCRIBE and
altering ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise), as in Kafka.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

from josefk.broker.context import RequestContext
from josefk.broker.handlers import handles
from josefk.broker.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted,
)
from josefk.broker.security.store import CredentialStore
from josefk.protocol.acls import AclOperation
from josefk.protocol.api import ApiKey
from josefk.protocol.errors import ErrorCode
from josefk.protocol.message_types import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

DescribeResponse = DescribeUserScramCredentialsResponse
AlterResponse = AlterUserScramCredentialsResponse

MECHANISM_CODES: Final[dict[int, str]] = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
CODE_OF: Final[dict[str, int]] = {name: code for code, name in MECHANISM_CODES.items()}


def _store(context: RequestContext) -> CredentialStore:
    store = context.broker.credentials
    assert store is not None
    return store


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
def handle_describe_user_scram_credentials(
    context: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not context.authorize_cluster(AclOperation.DESCRIBE):
        return context.refuse_as(DescribeResponse, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    users = _store(context).users()
    wanted = [user.name for user in request.users or ()]
    names = wanted if wanted else sorted(users)
    counts = Counter(wanted)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            error, message = ErrorCode.DUPLICATE_RESOURCE, f"Cannot describe user {name} twice"
        elif name not in users:
            error, message = (
                ErrorCode.RESOURCE_NOT_FOUND,
                f"Attempt to describe a user credential that does not exist: {name}",
            )
        else:
            error, message = ErrorCode.NONE, None
        infos = [
            DescribeResponse.CredentialInfo(
                mechanism=CODE_OF[mechanism], iterations=credential.iterations
            )
            for mechanism, credential in sorted(users.get(name, {}).items())
            if error == ErrorCode.NONE
        ]
        results.append(
            DescribeResponse.DescribeUserScramCredentialsResult(
                user=name, error_code=error, error_message=message, credential_infos=infos
            )
        )
    return DescribeResponse(error_code=ErrorCode.NONE, error_message=None, results=results)


def _refusal(
    name: str,
    entries: list[tuple[str, Any]],
    store: CredentialStore,
) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    seen = Counter(entry.mechanism for _, entry in entries)
    if any(count > 1 for count in seen.values()):
        return ErrorCode.DUPLICATE_RESOURCE, f"A user credential cannot be altered twice: {name}"
    for kind, entry in entries:
        mechanism = MECHANISM_CODES.get(entry.mechanism)
        if mechanism is None:
            return (
                ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                f"Unknown SCRAM mechanism {entry.mechanism}",
            )
        if kind == "delete" and store.get(name, mechanism) is None:
            return (
                ErrorCode.RESOURCE_NOT_FOUND,
                f"Attempt to delete a user credential that does not exist: {name} {mechanism}",
            )
        if kind == "upsert":
            if not MIN_ITERATIONS <= entry.iterations <= MAX_ITERATIONS:
                return (
                    ErrorCode.UNACCEPTABLE_CREDENTIAL,
                    f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}",
                )
            if not entry.salt or not entry.salted_password:
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and password must not be empty"
    return None


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
async def handle_alter_user_scram_credentials(
    context: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    if not context.authorize_cluster(AclOperation.ALTER):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        names = [e.name for e in request.deletions] + [e.name for e in request.upsertions]
        return AlterResponse(
            results=[
                AlterResponse.AlterUserScramCredentialsResult(
                    user=name, error_code=error, error_message=error.message
                )
                for name in dict.fromkeys(names)
            ]
        )
    store = _store(context)
    by_user: dict[str, list[tuple[str, Any]]] = {}
    for deletion in request.deletions:
        by_user.setdefault(deletion.name, []).append(("delete", deletion))
    for upsertion in request.upsertions:
        by_user.setdefault(upsertion.name, []).append(("upsert", upsertion))
    results = []
    changed = False
    for name, entries in by_user.items():
        refused = _refusal(name, entries, store)
        if refused is not None:
            error, message = refused
            results.append(
                AlterResponse.AlterUserScramCredentialsResult(
                    user=name, error_code=error, error_message=message
                )
            )
            continue
        for kind, entry in entries:
            mechanism = MECHANISM_CODES[entry.mechanism]
            if kind == "delete":
                store.delete(name, mechanism)
            else:
                credential: ScramCredential = credential_from_salted(
                    mechanism, bytes(entry.salt), entry.iterations, bytes(entry.salted_password)
                )
                store.upsert(name, credential)
        changed = True
        results.append(
            AlterResponse.AlterUserScramCredentialsResult(
                user=name, error_code=ErrorCode.NONE, error_message=None
            )
        )
    if changed:
        # Durable (the credential file, or etcd on a cluster) before the answer.
        await store.persist()
    return AlterResponse(results=results)
