"""SaslAuthenticate (key 36): one SASL token exchange, framed as a Kafka request (KIP-152).

v1 returns the session lifetime for re-authentication (KIP-368), v2 is flexible (KIP-482).
"""

from josefk.protocol.schema import field, request, response

REQUEST = request(
    api_key=36,
    name="SaslAuthenticate",
    valid="0-2",
    flexible="2+",
    fields=[
        field("auth_bytes", "bytes", "0+"),
    ],
)

RESPONSE = response(
    api_key=36,
    name="SaslAuthenticate",
    valid="0-2",
    flexible="2+",
    fields=[
        field("error_code", "int16", "0+"),
        field("error_message", "string", "0+", nullable="0+"),
        field("auth_bytes", "bytes", "0+"),
        field("session_lifetime_ms", "int64", "1+", default=0, ignorable=True),
    ],
)
