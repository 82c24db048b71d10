"""Kafka's classic group protocol and committed offsets, durable in ``__consumer_offsets``.

``coordinator`` drives the protocol, ``group`` holds a group's state machine and members,
``offsets_schema`` is the byte format of the offsets topic, ``store`` writes and reads that
topic, ``assignment`` reads the consumer protocol's subscription bytes. Nothing here imports
the handlers or the network layer.
"""
