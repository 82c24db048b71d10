"""Kafka's log layer: segments, indexes, the partition log and the log manager.

Owns the on-disk format (byte for byte Kafka's). Imports josefk.records and the topic config
model josefk.config.topic only; never
josefk.protocol, josefk.broker or josefk.metrics.
"""
