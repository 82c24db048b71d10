"""Golden frames: the first requests real clients sent (captured by golden/capture.py).

Each stored frame must decode, give the values the client is known to send, and re-encode
to exactly the same bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from josefk.protocol import decode_request, encode_request
from josefk.protocol.headers import parse_request_header

GOLDEN = Path(__file__).parent / "golden"
FRAMES = sorted(GOLDEN.glob("*/*.bin"))
TRAILING = {"confluent-kafka/02-Metadata-v13.bin": 3}


def test_every_client_captured() -> None:
    clients = {path.parent.name for path in FRAMES}
    assert {"confluent-kafka", "kafka-python", "aiokafka", "kafkajs"} <= clients


@pytest.mark.parametrize("path", FRAMES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_frame_decodes_and_reencodes(path: Path) -> None:
    frame = path.read_bytes()
    header, body = decode_request(frame)
    api_name, version = path.stem.split("-")[1:]
    assert type(body).__name__ == f"{api_name}Request"
    assert f"v{header.request_api_version}" == version
    client = path.parent.name
    assert header.client_id == (
        "golden-confluent" if client == "confluent-kafka" else f"golden-{client}"
    )
    reencoded = encode_request(header, body)[4:]
    # librdkafka's "all topics" Metadata v13 carries 3 bytes after the body; Kafka ignores
    # trailing bytes and so does josefk. Everything else re-encodes byte for byte.
    trailing = TRAILING.get(f"{path.parent.name}/{path.name}", 0)
    assert reencoded == frame[: len(frame) - trailing]
    info = parse_request_header(memoryview(frame))
    assert info.correlation_id == header.correlation_id
    assert info.body_offset is not None


def _decode(client: str, name: str) -> tuple[object, object]:
    return decode_request((GOLDEN / client / name).read_bytes())


def test_librdkafka_api_versions_v3_names_itself() -> None:
    _, body = _decode("confluent-kafka", "00-ApiVersions-v3.bin")
    assert body.client_software_name == "confluent-kafka-python"  # type: ignore[attr-defined]
    assert "rdkafka" in body.client_software_version  # type: ignore[attr-defined]


def test_kafka_python_api_versions_v4() -> None:
    _, body = _decode("kafka-python", "00-ApiVersions-v4.bin")
    assert body.client_software_name == "kafka-python"  # type: ignore[attr-defined]


def test_aiokafka_and_kafkajs_start_with_old_api_versions() -> None:
    header, _ = _decode("aiokafka", "00-ApiVersions-v0.bin")
    assert header.request_api_version == 0  # type: ignore[attr-defined]
    header, _ = _decode("kafkajs", "00-ApiVersions-v2.bin")
    assert header.request_api_version == 2  # type: ignore[attr-defined]


def test_metadata_requests() -> None:
    _, body = _decode("confluent-kafka", "02-Metadata-v13.bin")
    assert body.topics is None  # type: ignore[attr-defined]  # all topics
    _, body = _decode("kafkajs", "01-Metadata-v6.bin")
    assert body.topics is None  # type: ignore[attr-defined]
    assert body.allow_auto_topic_creation is False  # type: ignore[attr-defined]
    _, body = _decode("aiokafka", "01-Metadata-v5.bin")
    assert body.topics == []  # type: ignore[attr-defined]
