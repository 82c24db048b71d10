"""IncrementalAlterConfigs (key 44): set, delete, append to or subtract from individual
configs of resources, leaving the others alone.

KIP-339 introduced it (operations: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT); v1 is flexible
(KIP-482).
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=44,
    name="IncrementalAlterConfigs",
    valid="0-1",
    flexible="1+",
    fields=[
        array(
            "resources",
            "AlterConfigsResource",
            "0+",
            [
                field("resource_type", "int8", "0+"),
                field("resource_name", "string", "0+"),
                array(
                    "configs",
                    "AlterableConfig",
                    "0+",
                    [
                        field("name", "string", "0+"),
                        field("config_operation", "int8", "0+"),
                        field("value", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
        field("validate_only", "bool", "0+"),
    ],
)

RESPONSE = response(
    api_key=44,
    name="IncrementalAlterConfigs",
    valid="0-1",
    flexible="1+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        array(
            "responses",
            "AlterConfigsResourceResponse",
            "0+",
            [
                field("error_code", "int16", "0+"),
                field("error_message", "string", "0+", nullable="0+"),
                field("resource_type", "int8", "0+"),
                field("resource_name", "string", "0+"),
            ],
        ),
    ],
)
