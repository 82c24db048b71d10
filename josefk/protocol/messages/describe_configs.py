"""DescribeConfigs (key 32): the configs of topics, brokers and other resources, with where
each value comes from.

KIP-133 introduced it; KIP-226 (v1) adds synonyms and the config source (replacing v0's
is_default, gone with v0); v2 answers before throttling; KIP-569 (v3) adds the config type and
documentation; v4 is flexible (KIP-482). KIP-896 removed v0 in Kafka 4.0.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=32,
    name="DescribeConfigs",
    valid="1-4",
    flexible="4+",
    fields=[
        array(
            "resources",
            "DescribeConfigsResource",
            "1+",
            [
                field("resource_type", "int8", "1+"),
                field("resource_name", "string", "1+"),
                # Null asks for every config of the resource.
                field("configuration_keys", "[]string", "1+", nullable="1+"),
            ],
        ),
        field("include_synonyms", "bool", "1+", default=False),
        field("include_documentation", "bool", "3+", default=False),
    ],
)

RESPONSE = response(
    api_key=32,
    name="DescribeConfigs",
    valid="1-4",
    flexible="4+",
    fields=[
        field("throttle_time_ms", "int32", "1+"),
        array(
            "results",
            "DescribeConfigsResult",
            "1+",
            [
                field("error_code", "int16", "1+"),
                field("error_message", "string", "1+", nullable="1+"),
                field("resource_type", "int8", "1+"),
                field("resource_name", "string", "1+"),
                array(
                    "configs",
                    "DescribeConfigsResourceResult",
                    "1+",
                    [
                        field("name", "string", "1+"),
                        field("value", "string", "1+", nullable="1+"),
                        field("read_only", "bool", "1+"),
                        field("config_source", "int8", "1+", default=-1, ignorable=True),
                        field("is_sensitive", "bool", "1+"),
                        array(
                            "synonyms",
                            "DescribeConfigsSynonym",
                            "1+",
                            [
                                field("name", "string", "1+"),
                                field("value", "string", "1+", nullable="1+"),
                                field("source", "int8", "1+"),
                            ],
                            ignorable=True,
                        ),
                        field("config_type", "int8", "3+", default=0, ignorable=True),
                        field("documentation", "string", "3+", nullable="3+", ignorable=True),
                    ],
                ),
            ],
        ),
    ],
)
