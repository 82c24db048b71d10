"""ApiVersions (key 18): what the broker supports; KIP-511 adds the client's name in v3."""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=18,
    name="ApiVersions",
    valid="0-4",
    flexible="3+",
    fields=[
        field("client_software_name", "string", "3+", ignorable=True),
        field("client_software_version", "string", "3+", ignorable=True),
    ],
)

RESPONSE = response(
    api_key=18,
    name="ApiVersions",
    valid="0-4",
    flexible="3+",
    fields=[
        field("error_code", "int16", "0+"),
        array(
            "api_keys",
            "ApiVersion",
            "0+",
            [
                field("api_key", "int16", "0+"),
                field("min_version", "int16", "0+"),
                field("max_version", "int16", "0+"),
            ],
        ),
        field("throttle_time_ms", "int32", "1+", ignorable=True),
        array(
            "supported_features",
            "SupportedFeatureKey",
            "3+",
            [
                field("name", "string", "3+"),
                field("min_version", "int16", "3+"),
                field("max_version", "int16", "3+"),
            ],
            tag=0,
            tagged="3+",
            ignorable=True,
        ),
        field(
            "finalized_features_epoch",
            "int64",
            "3+",
            default=-1,
            tag=1,
            tagged="3+",
            ignorable=True,
        ),
        array(
            "finalized_features",
            "FinalizedFeatureKey",
            "3+",
            [
                field("name", "string", "3+"),
                field("max_version_level", "int16", "3+"),
                field("min_version_level", "int16", "3+"),
            ],
            tag=2,
            tagged="3+",
            ignorable=True,
        ),
        field(
            "zk_migration_ready",
            "bool",
            "3+",
            default=False,
            tag=3,
            tagged="3+",
            ignorable=True,
        ),
    ],
)
