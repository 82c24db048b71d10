"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms (and iteration counts) users
have credentials for, never the credentials themselves (KIP-554). A null ``users`` asks for
every user. Mechanism codes: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=50,
    name="DescribeUserScramCredentials",
    valid="0",
    flexible="0+",
    fields=[
        array("users", "UserName", "0+", [field("name", "string", "0+")], nullable="0+"),
    ],
)

RESPONSE = response(
    api_key=50,
    name="DescribeUserScramCredentials",
    valid="0",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        field("error_code", "int16", "0+"),
        field("error_message", "string", "0+", nullable="0+"),
        array(
            "results",
            "DescribeUserScramCredentialsResult",
            "0+",
            [
                field("user", "string", "0+"),
                field("error_code", "int16", "0+"),
                field("error_message", "string", "0+", nullable="0+"),
                array(
                    "credential_infos",
                    "CredentialInfo",
                    "0+",
                    [
                        field("mechanism", "int8", "0+"),
                        field("iterations", "int32", "0+"),
                    ],
                ),
            ],
        ),
    ],
)
