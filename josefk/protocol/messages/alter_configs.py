"""AlterConfigs (key 33): replace the whole dynamic config of resources (configs left out are
reset); IncrementalAlterConfigs (KIP-339) is its successor.

KIP-133 introduced it; v1 answers before throttling; v2 is flexible (KIP-482). Kafka 4.0 still
accepts v0.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=33,
    name="AlterConfigs",
    valid="0-2",
    flexible="2+",
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
                        field("value", "string", "0+", nullable="0+"),
                    ],
                ),
            ],
        ),
        field("validate_only", "bool", "0+"),
    ],
)

RESPONSE = response(
    api_key=33,
    name="AlterConfigs",
    valid="0-2",
    flexible="2+",
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
