"""DeleteAcls (key 31): remove the ACL bindings matching each filter and report, per filter,
the bindings that matched.

KIP-140 introduced it; KIP-290 (v1) adds resource pattern types (3, LITERAL, by default) and
answers before throttling; v2 is flexible (KIP-482); v3 allows the USER resource type
(KIP-373). KIP-896 removed v0 in Kafka 4.0.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=31,
    name="DeleteAcls",
    valid="1-3",
    flexible="2+",
    fields=[
        array(
            "filters",
            "DeleteAclsFilter",
            "1+",
            [
                field("resource_type_filter", "int8", "1+"),
                field("resource_name_filter", "string", "1+", nullable="1+"),
                field("pattern_type_filter", "int8", "1+", default=3),
                field("principal_filter", "string", "1+", nullable="1+"),
                field("host_filter", "string", "1+", nullable="1+"),
                field("operation", "int8", "1+"),
                field("permission_type", "int8", "1+"),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=31,
    name="DeleteAcls",
    valid="1-3",
    flexible="2+",
    fields=[
        field("throttle_time_ms", "int32", "1+"),
        array(
            "filter_results",
            "DeleteAclsFilterResult",
            "1+",
            [
                field("error_code", "int16", "1+"),
                field("error_message", "string", "1+", nullable="1+"),
                array(
                    "matching_acls",
                    "DeleteAclsMatchingAcl",
                    "1+",
                    [
                        field("error_code", "int16", "1+"),
                        field("error_message", "string", "1+", nullable="1+"),
                        field("resource_type", "int8", "1+"),
                        field("resource_name", "string", "1+"),
                        field("pattern_type", "int8", "1+", default=3),
                        field("principal", "string", "1+"),
                        field("host", "string", "1+"),
                        field("operation", "int8", "1+"),
                        field("permission_type", "int8", "1+"),
                    ],
                ),
            ],
        ),
    ],
)
