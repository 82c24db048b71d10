"""ShareFetch and ShareAcknowledge v2 (Kafka 4.2; KIP-1206, KIP-1222): where the new fields
sit on the wire and that they round-trip.

Kafka-python ships no definitions of these APIs (NOT_SHIPPED in test_kafka_json_specs.py), so
the layout is pinned here against v1 of the same message: v2 is v1 with ShareFetchRequest's
share_acquire_mode (int8) and is_renew_ack (bool) after batch_size, ShareAcknowledgeRequest's
is_renew_ack after share_session_epoch, and ShareAcknowledgeResponse's
acquisition_lock_timeout_ms (int32) after error_message (as franz-go's kmsg, which speaks
them, lays them out). The broker's renew is tested in tests/integration/test_share_groups.py.
"""

from __future__ import annotations

import struct
import uuid

from josefk.protocol.api import ApiKey, request_class, response_class
from josefk.protocol.compiler import compile_message
from josefk.protocol.messages import all_specs

FETCH = request_class(ApiKey.SHARE_FETCH)
ACK = request_class(ApiKey.SHARE_ACKNOWLEDGE)
ACK_RESPONSE = response_class(ApiKey.SHARE_ACKNOWLEDGE)
TOPIC = uuid.UUID(int=7)


def _message(class_name: str):  # type: ignore[no-untyped-def]
    (spec,) = [s for pair in all_specs() for s in pair if s.class_name == class_name]
    return compile_message(spec)


def _fetch_request(**v2: object) -> object:
    batch = FETCH.AcknowledgementBatch(first_offset=3, last_offset=4, acknowledge_types=[4])
    return FETCH(
        group_id="g",
        member_id="m",
        share_session_epoch=2,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=10,
        batch_size=10,
        topics=[
            FETCH.FetchTopic(
                topic_id=TOPIC,
                partitions=[
                    FETCH.FetchPartition(partition_index=0, acknowledgement_batches=[batch])
                ],
            )
        ],
        forgotten_topics_data=[],
        **v2,
    )


def test_share_fetch_request_v2_adds_acquire_mode_and_renew_after_batch_size() -> None:
    message = _message("ShareFetchRequest")
    v1 = message.encode(_fetch_request(), 1)
    value = _fetch_request(share_acquire_mode=1, is_renew_ack=True)
    v2 = message.encode(value, 2)
    # group "g" and member "m" (compact strings, 2 bytes each) and six int32s.
    head = 2 + 2 + 6 * 4
    assert v2 == v1[:head] + b"\x01\x01" + v1[head:]
    decoded = message.decode(v2, 2)
    assert decoded.share_acquire_mode == 1 and decoded.is_renew_ack is True
    assert decoded.topics[0].partitions[0].acknowledgement_batches[0].acknowledge_types == [4]


def test_share_acknowledge_v2_renew_flag_and_lock_timeout() -> None:
    request = _message("ShareAcknowledgeRequest")
    value = ACK(group_id="g", member_id="m", share_session_epoch=5, topics=[])
    v1 = request.encode(value, 1)
    v2 = request.encode(
        ACK(group_id="g", member_id="m", share_session_epoch=5, is_renew_ack=True, topics=[]), 2
    )
    assert v2 == v1[:8] + b"\x01" + v1[8:]
    assert request.decode(v2, 2).is_renew_ack is True

    response = _message("ShareAcknowledgeResponse")
    answer = ACK_RESPONSE(error_code=0, acquisition_lock_timeout_ms=15_000, responses=[])
    r1, r2 = response.encode(answer, 1), response.encode(answer, 2)
    # throttle (int32), error code (int16), null error message (1 byte), then the timeout.
    assert r2 == r1[:7] + struct.pack(">i", 15_000) + r1[7:]
    assert response.decode(r2, 2).acquisition_lock_timeout_ms == 15_000
    # v1 has no such field: it is not sent, and reads back as its default.
    assert response.decode(r1, 1).acquisition_lock_timeout_ms == 0
