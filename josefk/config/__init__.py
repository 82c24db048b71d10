"""Broker and topic configuration with Kafka's property names and defaults.

Owns the pydantic models and their loading from a properties file, the environment and the
command line. Must not import josefk.broker or josefk.storage.
"""
