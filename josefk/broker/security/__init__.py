"""SASL authentication: SCRAM credentials, their store, and the per-connection exchange.

Owns the SCRAM-SHA-256/512 server (RFC 5802, RFC 7677), PLAIN (RFC 4616) checked against
the same SCRAM credentials, the credential file in the first log dir and the per-connection
``SaslSession``. Works on bytes only: whether they came over TLS or plaintext is the network
layer's business. Must not import josefk.broker.network, the handlers or josefk.storage.
"""
