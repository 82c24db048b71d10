"""The ACL authorizer: which principal, from which host, may do which operation on which
resource, with the documented rules of Kafka's standard authorizer.

Owns ``AclBinding`` and ``AclBindingFilter`` (what CreateAcls, DescribeAcls and DeleteAcls
carry), their validation and matching, and ``Authorizer``. The rules, in order:

1. A principal listed in ``super.users`` may do everything.
2. The ACLs that apply to a resource are those of its type whose pattern matches its name: a
   LITERAL pattern equal to the name or the wildcard ``*``, a PREFIXED pattern the name starts
   with. Of those, an ACL applies to a request when its principal is the request's or
   ``User:*`` and its host is the peer's address or ``*``.
3. A DENY that applies for the operation (or for ALL) refuses, whatever allows it.
4. Otherwise an ALLOW that applies for the operation, for ALL, or for an operation that implies
   it (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS)
   permits it.
5. With no ACL at all on the resource (for any principal), ``allow.everyone.if.no.acl.found``
   decides; else the request is refused.

Decisions are cached per (principal, host, operation, resource) until the ACLs change, so a
produce or fetch costs a dict lookup per topic. Runs on the event loop; no method awaits.
Must not import josefk.broker.network, the handlers or josefk.storage.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from josefk.protocol.acls import (
    CLUSTER_NAME,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = [
    "SUPPORTED_OPERATIONS",
    "AclBinding",
    "AclBindingFilter",
    "Authorizer",
    "InvalidAcl",
    "operations_bitfield",
]

# The operations that mean something on each resource type (KIP-430's authorized operations
# are reported over these).
SUPPORTED_OPERATIONS: Final[dict[ResourceType, tuple[AclOperation, ...]]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    # Kafka 4 added the configs pair with group configs (KIP-848); DescribeConfigs and
    # IncrementalAlterConfigs of a GROUP resource check them.
    ResourceType.GROUP: (
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}

# The ALLOW operations that grant each operation, beside itself and ALL.
_IMPLIED_BY: Final[dict[AclOperation, frozenset[AclOperation]]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}

_CACHE_LIMIT: Final = 100_000
# A resource name no ACL can name literally (Kafka's names are [a-zA-Z0-9._-]).
_UNNAMED: Final = "\x00unnamed"


class InvalidAcl(ValueError):
    """A binding or filter CreateAcls / DescribeAcls / DeleteAcls must refuse
    (INVALID_REQUEST), with the reason."""


def operations_bitfield(operations: Iterable[AclOperation]) -> int:
    """KIP-430's form: bit ``code`` set for each operation."""
    bits = 0
    for operation in operations:
        bits |= 1 << int(operation)
    return bits


def _valid_principal(principal: str) -> bool:
    kind, sep, name = principal.partition(":")
    return bool(sep and kind and name)


def _codes(
    what: str, resource_type: int, pattern_type: int, operation: int, permission: int
) -> tuple[ResourceType, PatternType, AclOperation, AclPermissionType]:
    """The wire codes of a binding or filter as members; InvalidAcl for a code Kafka has not
    defined."""
    try:
        return (
            ResourceType(resource_type),
            PatternType(pattern_type),
            AclOperation(operation),
            AclPermissionType(permission),
        )
    except ValueError as exc:
        raise InvalidAcl(f"unknown code in ACL {what}: {exc}") from None


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def of(
        cls,
        resource_type: int,
        resource_name: str,
        pattern_type: int,
        principal: str,
        host: str,
        operation: int,
        permission: int,
    ) -> AclBinding:
        """A binding from wire codes, validated as Kafka validates a new ACL."""
        rtype, ptype, op, perm = _codes(
            "binding", resource_type, pattern_type, operation, permission
        )
        binding = cls(rtype, resource_name, ptype, principal, host, op, perm)
        binding.validate()
        return binding

    def validate(self) -> None:
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidAcl(f"invalid resource type {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"invalid pattern type {self.pattern_type.name}")
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise InvalidAcl(f"invalid operation {self.operation.name}")
        if self.permission in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
            raise InvalidAcl(f"invalid permission type {self.permission.name}")
        if not self.resource_name:
            raise InvalidAcl("resource name must not be empty")
        if self.resource_type == ResourceType.CLUSTER and (
            self.resource_name != CLUSTER_NAME or self.pattern_type != PatternType.LITERAL
        ):
            raise InvalidAcl(f"the cluster resource is the literal name {CLUSTER_NAME}")
        if not _valid_principal(self.principal):
            raise InvalidAcl(f"invalid principal {self.principal!r} (expected Type:name)")
        if not self.host:
            raise InvalidAcl("host must not be empty (use * for every host)")

    def encode(self) -> list[object]:
        return [
            int(self.resource_type),
            self.resource_name,
            int(self.pattern_type),
            self.principal,
            self.host,
            int(self.operation),
            int(self.permission),
        ]

    @classmethod
    def decode(cls, entry: list[object]) -> AclBinding:
        rtype, name, ptype, principal, host, operation, permission = (str(e) for e in entry)
        return cls.of(
            int(rtype), name, int(ptype), principal, host, int(operation), int(permission)
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A filter over bindings; None for a name, principal or host matches any."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def of(
        cls,
        resource_type: int,
        resource_name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> AclBindingFilter:
        rtype, ptype, op, perm = _codes(
            "filter", resource_type, pattern_type, operation, permission
        )
        found = cls(rtype, resource_name, ptype, principal, host, op, perm)
        for name, value in (
            ("resource type", found.resource_type),
            ("pattern type", found.pattern_type),
            ("operation", found.operation),
            ("permission type", found.permission),
        ):
            if value == 0:
                raise InvalidAcl(f"the filter's {name} is UNKNOWN")
        return found

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != binding.resource_type:
            return False
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != binding.operation:
            return False
        if self.permission != AclPermissionType.ANY and self.permission != binding.permission:
            return False
        return self._matches_pattern(binding)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        kind = self.pattern_type
        if kind not in (PatternType.ANY, PatternType.MATCH) and kind != binding.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if kind == PatternType.ANY or kind == binding.pattern_type:
            return name == binding.resource_name
        # MATCH: the bindings that would apply to a resource called ``name``.
        if binding.pattern_type == PatternType.LITERAL:
            return binding.resource_name in (name, WILDCARD)
        return name.startswith(binding.resource_name)


class _TypeIndex:
    """The bindings of one resource type, by literal name and by prefix."""

    __slots__ = ("literal", "prefix_lengths", "prefixed")

    def __init__(self) -> None:
        self.literal: dict[str, list[AclBinding]] = {}
        self.prefixed: dict[str, list[AclBinding]] = {}
        self.prefix_lengths: list[int] = []

    def add(self, binding: AclBinding) -> None:
        if binding.pattern_type == PatternType.LITERAL:
            self.literal.setdefault(binding.resource_name, []).append(binding)
        else:
            self.prefixed.setdefault(binding.resource_name, []).append(binding)
            self.prefix_lengths = sorted({len(p) for p in self.prefixed})

    def applicable(self, name: str) -> list[AclBinding]:
        found = list(self.literal.get(name, ()))
        if name != WILDCARD:
            found.extend(self.literal.get(WILDCARD, ()))
        for length in self.prefix_lengths:
            if length > len(name):
                break
            found.extend(self.prefixed.get(name[:length], ()))
        return found


class Authorizer:
    """ACL decisions over an in-memory set of bindings. The set is replaced or changed by
    the ACL store; each change bumps ``version`` and empties the decision cache."""

    def __init__(
        self,
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        bindings: Iterable[AclBinding] = (),
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.version = 0
        self._bindings: dict[AclBinding, None] = {}
        self._index: dict[ResourceType, _TypeIndex] = {}
        self._cache: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}
        self.replace(bindings)

    # -- the ACL set -------------------------------------------------------------------

    def bindings(self) -> list[AclBinding]:
        return list(self._bindings)

    def replace(self, bindings: Iterable[AclBinding]) -> None:
        self._bindings = dict.fromkeys(bindings)
        self._reindex()

    def add(self, bindings: Iterable[AclBinding]) -> None:
        for binding in bindings:
            self._bindings[binding] = None
        self._reindex()

    def matching(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self._bindings if acl_filter.matches(b)]

    def remove(self, bindings: Iterable[AclBinding]) -> None:
        for binding in bindings:
            self._bindings.pop(binding, None)
        self._reindex()

    def _reindex(self) -> None:
        index: dict[ResourceType, _TypeIndex] = {}
        for binding in self._bindings:
            index.setdefault(binding.resource_type, _TypeIndex()).add(binding)
        self._index = index
        self._cache = {}
        self.version += 1

    # -- decisions ---------------------------------------------------------------------

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        key = (principal, host, operation, resource_type, name)
        cache = self._cache
        decided = cache.get(key)
        if decided is None:
            decided = self._decide(principal, host, operation, resource_type, name)
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[key] = decided
        return decided

    def _decide(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        index = self._index.get(resource_type)
        acls = index.applicable(name) if index is not None else []
        if not acls:
            return self.allow_everyone_if_no_acl_found
        granting = _IMPLIED_BY.get(operation, frozenset())
        allowed = False
        for acl in acls:
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != host and acl.host != WILDCARD:
                continue
            if acl.permission == AclPermissionType.DENY:
                if acl.operation == operation or acl.operation == AclOperation.ALL:
                    return False
            elif (
                acl.operation == operation
                or acl.operation == AclOperation.ALL
                or acl.operation in granting
            ):
                allowed = True
        return allowed

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """KIP-430: the bit field of the supported operations ``principal`` may do."""
        return operations_bitfield(
            op
            for op in SUPPORTED_OPERATIONS.get(resource_type, ())
            if self.authorize(principal, host, op, resource_type, name)
        )

    def any_allowed_on_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of the type allows ``operation`` (Kafka's
        authorizeByResourceType, which lets a producer with WRITE on any topic be
        idempotent): tried on each ACL's name, a name just under each prefix (a literal DENY
        of the prefix itself must not hide the rest of it), and a name no ACL names."""
        if principal in self.super_users:
            return True
        index = self._index.get(resource_type)
        names: set[str] = {_UNNAMED}
        if index is not None:
            names.update(index.literal)
            names.update(index.prefixed)
            names.update(prefix + _UNNAMED for prefix in index.prefixed)
        return any(
            self.authorize(principal, host, operation, resource_type, name) for name in names
        )
