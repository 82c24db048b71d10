"""DescribeAcls (key 29): the ACL bindings that match a filter, grouped by resource.

KIP-140 introduced it; KIP-290 (v1) adds resource pattern types (literal, prefixed; 3 is
LITERAL, the default) and answers before throttling; v2 is flexible (KIP-482); v3 allows the
USER resource type (KIP-373). KIP-896 removed v0 in Kafka 4.0.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=29,
    name="DescribeAcls",
    valid="1-3",
    flexible="2+",
    fields=[
        field("resource_type_filter", "int8", "1+"),
        field("resource_name_filter", "string", "1+", nullable="1+"),
        field("pattern_type_filter", "int8", "1+", default=3),
        field("principal_filter", "string", "1+", nullable="1+"),
        field("host_filter", "string", "1+", nullable="1+"),
        field("operation", "int8", "1+"),
        field("permission_type", "int8", "1+"),
    ],
)

RESPONSE = response(
    api_key=29,
    name="DescribeAcls",
    valid="1-3",
    flexible="2+",
    fields=[
        field("throttle_time_ms", "int32", "1+"),
        field("error_code", "int16", "1+"),
        field("error_message", "string", "1+", nullable="1+"),
        array(
            "resources",
            "DescribeAclsResource",
            "1+",
            [
                field("resource_type", "int8", "1+"),
                field("resource_name", "string", "1+"),
                field("pattern_type", "int8", "1+", default=3),
                array(
                    "acls",
                    "AclDescription",
                    "1+",
                    [
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
