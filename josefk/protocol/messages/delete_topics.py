"""DeleteTopics (key 20): delete topics by name or, from v6, by topic id.

v1 adds the throttle time, v2 answers before throttling, v3 may return
TOPIC_DELETION_DISABLED, v4 is flexible (KIP-482), KIP-599 (v5) adds per-topic error messages
and THROTTLING_QUOTA_EXCEEDED, KIP-516 (v6) replaces the list of names by (name, topic id)
pairs where the name may be null. KIP-896 removed v0 in Kafka 4.0.
"""

from josefk.protocol.schema import array, field, request, response

REQUEST = request(
    api_key=20,
    name="DeleteTopics",
    valid="1-6",
    flexible="4+",
    fields=[
        array(
            "topics",
            "DeleteTopicState",
            "6+",
            [
                # Null when the topic is named by its id only.
                field("name", "string", "6+", nullable="6+", default=None),
                field("topic_id", "uuid", "6+"),
            ],
        ),
        field("topic_names", "[]string", "1-5", ignorable=True),
        field("timeout_ms", "int32", "1+"),
    ],
)

RESPONSE = response(
    api_key=20,
    name="DeleteTopics",
    valid="1-6",
    flexible="4+",
    fields=[
        field("throttle_time_ms", "int32", "1+", ignorable=True),
        array(
            "responses",
            "DeletableTopicResult",
            "1+",
            [
                field("name", "string", "1+", nullable="6+"),
                field("topic_id", "uuid", "6+", ignorable=True),
                field("error_code", "int16", "1+"),
                field("error_message", "string", "5+", nullable="5+", default=None, ignorable=True),
            ],
        ),
    ],
)
