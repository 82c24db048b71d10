"""Kafka's v2 record batch (magic 2): the bottom layer of josefk.

Owns the byte layout of record batches and records: a zero-copy header view, validation and
CRC32C, the in-place rewrite of broker-owned fields, record iteration and batch building, and
the compression codecs. Imports nothing else from josefk.
"""
