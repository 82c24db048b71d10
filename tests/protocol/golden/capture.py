"""Capture the first requests real Kafka clients send, as golden frames for the tests.

Run ``python tests/protocol/golden/capture.py`` from the repository root. For each client
(confluent-kafka, kafka-python, aiokafka, KafkaJS when node and tests/js/node_modules exist)
it starts a listener on 127.0.0.1:<free port>, answers ApiVersions and Metadata with
josefk's own codec so the client goes on to its next request, and writes each request frame
(payload without the size prefix) to ``<client>/NN-<Api>-vV.bin``. Anything else is
recorded and left unanswered. Not a test: the tests read the stored files.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from josefk.protocol import api as protocol_api  # noqa: E402
from josefk.protocol.errors import ErrorCode  # noqa: E402
from josefk.protocol.framing import FrameDecoder  # noqa: E402
from josefk.protocol.headers import parse_request_header  # noqa: E402

HERE = Path(__file__).resolve().parent
MAX_FRAMES = 3


def _api_versions_response(version: int) -> Any:
    cls = protocol_api.response_class(18)
    ranges = protocol_api.api_versions_ranges()
    keys = [
        cls.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in ranges.items()
    ]
    return cls(error_code=0, api_keys=keys)


def _metadata_response(port: int, request: Any) -> Any:
    cls = protocol_api.response_class(3)
    topics = []
    for topic in request.topics or []:
        topics.append(
            cls.MetadataResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=topic.name
            )
        )
    return cls(
        brokers=[cls.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=port)],
        cluster_id="josefk-golden",
        controller_id=0,
        topics=topics,
    )


class Recorder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.frames: list[tuple[str, bytes]] = []
        self.done = asyncio.Event()
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        try:
            while not self.done.is_set():
                data = await reader.read(65536)
                if not data:
                    return
                for frame in decoder.feed(data):
                    self._answer(bytes(frame), writer)
                await writer.drain()
        finally:
            writer.close()

    def _answer(self, frame: bytes, writer: asyncio.StreamWriter) -> None:
        if len(self.frames) >= MAX_FRAMES:
            self.done.set()
            return
        info = parse_request_header(memoryview(frame))
        try:
            name = protocol_api.api(info.api_key).name
        except Exception:  # noqa: BLE001  an API josefk does not declare
            name = f"Api{info.api_key}"
        self.frames.append((f"{len(self.frames):02d}-{name}-v{info.api_version}.bin", frame))
        if info.api_key == 18:
            version = info.api_version if info.api_version <= 4 else 0
            body = _api_versions_response(version)
            if info.api_version > 4:
                body = protocol_api.response_class(18)(
                    error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=body.api_keys
                )
            writer.write(protocol_api.encode_response(info.correlation_id, body, version))
        elif info.api_key == 3:
            _, request = protocol_api.decode_request(frame)
            body = _metadata_response(self.port, request)
            writer.write(protocol_api.encode_response(info.correlation_id, body, info.api_version))
        else:
            self.done.set()
        if len(self.frames) >= MAX_FRAMES:
            self.done.set()


def run_confluent(addr: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(
        {"bootstrap.servers": addr, "client.id": "golden-confluent", "log_level": 0}
    )
    with contextlib.suppress(Exception):
        admin.list_topics(timeout=3)


def run_kafka_python(addr: str) -> None:
    from kafka import KafkaAdminClient

    with contextlib.suppress(Exception):
        admin = KafkaAdminClient(
            bootstrap_servers=addr, client_id="golden-kafka-python", request_timeout_ms=3000
        )
        with contextlib.suppress(Exception):
            admin.list_topics()
        admin.close()


async def run_aiokafka(addr: str) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=addr, client_id="golden-aiokafka")
    with contextlib.suppress(Exception):
        await asyncio.wait_for(producer.start(), 4)
    with contextlib.suppress(Exception):
        await producer.stop()


KAFKAJS = """
const { Kafka, logLevel } = require('kafkajs');
const kafka = new Kafka({ clientId: 'golden-kafkajs', brokers: [process.argv[process.argv.length - 1]],
  logLevel: logLevel.NOTHING, retry: { retries: 0 }, requestTimeout: 3000 });
const admin = kafka.admin();
(async () => { try { await admin.connect(); await admin.fetchTopicMetadata({ topics: [] }); }
  catch (e) {} finally { try { await admin.disconnect(); } catch (e) {} process.exit(0); } })();
"""


def run_kafkajs(addr: str) -> None:
    js = ROOT / "tests" / "js"
    if shutil.which("node") is None or not (js / "node_modules" / "kafkajs").exists():
        print("kafkajs: skipped (node or tests/js/node_modules missing)")
        return
    subprocess.run(["node", "-e", KAFKAJS, addr], cwd=js, timeout=15, check=False)


async def capture(name: str, runner: Any) -> None:
    recorder = Recorder(name)
    server = await asyncio.start_server(recorder.handle, "127.0.0.1", 0)
    recorder.port = server.sockets[0].getsockname()[1]
    addr = f"127.0.0.1:{recorder.port}"
    if asyncio.iscoroutinefunction(runner):
        task = asyncio.ensure_future(runner(addr))
    else:
        task = asyncio.ensure_future(asyncio.to_thread(runner, addr))
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(recorder.done.wait(), 8)
    server.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(task, 10)
    out = HERE / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    manifest = []
    for filename, frame in recorder.frames:
        (out / filename).write_bytes(frame)
        manifest.append(filename)
    print(name, json.dumps(manifest))


async def main() -> None:
    await capture("confluent-kafka", run_confluent)
    await capture("kafka-python", run_kafka_python)
    await capture("aiokafka", run_aiokafka)
    await capture("kafkajs", run_kafkajs)


if __name__ == "__main__":
    asyncio.run(main())
