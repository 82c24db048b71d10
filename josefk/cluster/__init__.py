"""The cluster's shared metadata, kept in etcd.

A single broker needs none of this: its metadata is its own catalog. Brokers started with
``josefk.etcd.endpoints`` keep what the whole cluster must agree on (the cluster id, live
brokers, the controller, topics, partition state, producer id blocks) in etcd, an existing
consensus engine; josefk writes no consensus of its own.

Owns the key layout and the compare-and-swap rules (``metadata_store``). Imports only the
standard library and the etcd client; josefk.broker builds on it, never the other way round.
The metadata's value types (``values``) and every exception that leaves the package
(``errors``) import no etcd client: a single-node broker uses them without loading it, and the
etcd client's own exceptions never leave the package (``metadata_store`` translates them).
"""
