"""The Kafka wire protocol, sans-io: bytes in, typed messages out, and back.

Owns primitive types, message declarations for every API and version, request and response
headers, error codes and framing. Record data stays an opaque memoryview. Must not import
josefk.storage, josefk.broker or anything that does I/O.
"""
