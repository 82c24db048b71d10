"""SaslHandshake (key 17): choose the SASL mechanism before authenticating.

v1 (KIP-152) means the SASL tokens that follow travel in SaslAuthenticate requests instead of
raw frames. The version cannot grow (KAFKA-9577), so the API has no flexible versions.
"""

from josefk.protocol.schema import field, request, response

REQUEST = request(
    api_key=17,
    name="SaslHandshake",
    valid="0-1",
    flexible="none",
    fields=[
        field("mechanism", "string", "0+"),
    ],
)

RESPONSE = response(
    api_key=17,
    name="SaslHandshake",
    valid="0-1",
    flexible="none",
    fields=[
        field("error_code", "int16", "0+"),
        field("mechanisms", "[]string", "0+"),
    ],
)
