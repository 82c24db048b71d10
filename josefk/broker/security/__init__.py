"""Authentication: SASL (SCRAM credentials, their store, the per-connection exchange) and TLS
(server contexts from PEM files, the client certificate's principal); and authorization (the
ACL authorizer and where its ACLs are kept).

Owns the SCRAM-SHA-256/512 server (RFC 5802, RFC 7677), PLAIN (RFC 4616) checked against
the same SCRAM credentials, the credential file in the first log dir and the per-connection
``SaslSession``; in ``tls``, the TLS listeners' contexts, the RFC 2253 subject of a client
certificate and ``ssl.principal.mapping.rules``; in ``authorizer`` and ``acl_store``, the ACL
authorizer and its store (a file in the first log dir, or one etcd key in a cluster). SASL
works on bytes only: whether they came over TLS or plaintext is the network layer's business
(josefk.broker.tls_connection runs the handshake). Must not import josefk.broker.network, the
handlers or josefk.storage.
"""
