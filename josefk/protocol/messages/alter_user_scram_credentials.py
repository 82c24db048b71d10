"""AlterUserScramCredentials (key 51): delete or set users' SCRAM credentials (KIP-554).

An upsertion carries the salt and the salted password (PBKDF2 done by the client), never the
password; the broker derives StoredKey and ServerKey from it. One result per user named.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=51,
    name="AlterUserScramCredentials",
    valid="0",
    flexible="0+",
    fields=[
        array(
            "deletions",
            "ScramCredentialDeletion",
            "0+",
            [
                field("name", "string", "0+"),
                field("mechanism", "int8", "0+"),
            ],
        ),
        array(
            "upsertions",
            "ScramCredentialUpsertion",
            "0+",
            [
                field("name", "string", "0+"),
                field("mechanism", "int8", "0+"),
                field("iterations", "int32", "0+"),
                field("salt", "bytes", "0+"),
                field("salted_password", "bytes", "0+"),
            ],
        ),
    ],
)

RESPONSE = response(
    api_key=51,
    name="AlterUserScramCredentials",
    valid="0",
    flexible="0+",
    fields=[
        field("throttle_time_ms", "int32", "0+"),
        array(
            "results",
            "AlterUserScramCredentialsResult",
            "0+",
            [
                field("user", "string", "0+"),
                field("error_code", "int16", "0+"),
                field("error_message", "string", "0+", nullable="0+"),
            ],
        ),
    ],
)
