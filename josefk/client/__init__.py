"""josefk's own asyncio Kafka client: producer, consumer and admin.

Built on josefk.protocol and josefk.records only; never imports josefk.storage or
josefk.broker.
"""
