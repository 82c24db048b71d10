"""``josefk dump-log`` over real segment files: batches, records, index checks, JSON."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import click
from click.testing import CliRunner

from josefk.cli.dump_log import dump_log
from josefk.records import BatchBuilder, Compression, RecordBatch
from josefk.storage.segment import LogSegment

TS = 1_700_000_000_000


def write_segment(directory: Path, batches: int = 5) -> LogSegment:
    segment = LogSegment.open(directory, 100, index_interval_bytes=50)
    offset = 100
    for n in range(batches):
        builder = BatchBuilder(
            base_offset=offset, compression=Compression.GZIP if n == 1 else Compression.NONE
        )
        for i in range(3):
            builder.append(
                f"k{i}".encode(), f"value-{offset + i}".encode(), timestamp=TS + n * 10 + i
            )
        data = builder.build()
        view = RecordBatch(memoryview(data))
        segment.append(view.last_offset, view.max_timestamp, view.last_offset, memoryview(data))
        offset += 3
    segment.close()
    return segment


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(dump_log, list(args))
    return result.exit_code, result.output


def test_log_batches_and_records(tmp_path: Path) -> None:
    write_segment(tmp_path)
    code, out = run(str(tmp_path / "00000000000000000100.log"), "--print-records")
    assert code == 0, out
    assert "base_offset: 100 last_offset: 102 count: 3" in out
    assert "compression_codec: gzip" in out
    assert "crc_valid: True" in out
    assert "| offset: 104 timestamp: 1700000000011" in out
    assert "payload: value-114" in out


def test_json_output_for_all_three_files(tmp_path: Path) -> None:
    write_segment(tmp_path)
    files = sorted(str(p) for p in tmp_path.iterdir())
    code, out = run("--json", *files)
    assert code == 0, out
    document = json.loads(out)
    by_kind = {f["kind"]: f for f in document["files"]}
    log = by_kind["log"]
    assert [b["base_offset"] for b in log["batches"]] == [100, 103, 106, 109, 112]
    assert log["batches"][0]["position"] == 0 and log["batches"][0]["create_time"] == TS + 2
    assert all(b["magic"] == 2 and b["crc_valid"] for b in log["batches"])
    assert log["invalid_bytes"] == 0
    offsets = by_kind["offset_index"]["entries"]
    assert [e["offset"] for e in offsets] == [105, 108, 111, 114]
    assert offsets[0]["position"] == log["batches"][1]["position"]
    times = by_kind["time_index"]["entries"]
    assert times[-1] == {"timestamp": TS + 42, "offset": 114}
    assert by_kind["offset_index"]["problems"] == [] == by_kind["time_index"]["problems"]


def test_corrupt_batch_and_trailing_garbage_are_reported(tmp_path: Path) -> None:
    segment = write_segment(tmp_path, batches=2)
    data = bytearray(segment.path.read_bytes())
    data[-1] ^= 0xFF  # last byte of the second batch: its CRC no longer matches
    data += b"\x00\x01\x02"
    segment.path.write_bytes(bytes(data))
    code, out = run("--json", str(segment.path))
    assert code == 1
    log = json.loads(out)["files"][0]
    assert [b["crc_valid"] for b in log["batches"]] == [True, False]
    assert log["invalid_bytes"] == 3
    code, out = run(str(segment.path))
    assert "crc_valid: False" in out and "Found 3 invalid bytes" in out


def test_verify_index_only_finds_entries_that_disagree_with_the_log(tmp_path: Path) -> None:
    segment = write_segment(tmp_path)
    index_path = segment.offset_index.path
    code, out = run("--verify-index-only", str(index_path), str(segment.time_index.path))
    assert code == 0 and "entries verified" in out and "position:" not in out
    entries = bytearray(index_path.read_bytes())
    struct.pack_into(">ii", entries, 8, 8, 999)  # offset 108 now points nowhere
    index_path.write_bytes(bytes(entries))
    code, out = run("--verify-index-only", str(index_path))
    assert code == 1
    assert "points at position 999" in out


def test_time_index_mismatch_is_reported(tmp_path: Path) -> None:
    segment = write_segment(tmp_path)
    path = segment.time_index.path
    entries = bytearray(path.read_bytes())
    struct.pack_into(">q", entries, 0, TS + 5)
    path.write_bytes(bytes(entries))
    code, out = run("--json", "--verify-index-only", str(path))
    assert code == 1
    problems = json.loads(out)["files"][0]["problems"]
    assert any("max timestamp" in p for p in problems)


def test_preallocated_index_of_an_active_segment_stops_at_the_zeros(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, index_interval_bytes=1)
    for offset in range(3):
        data = BatchBuilder(base_offset=offset)
        data.append(b"k", b"v", timestamp=TS + offset)
        built = data.build()
        segment.append(offset, TS + offset, offset, memoryview(built))
    segment.flush()
    code, out = run("--json", str(segment.offset_index.path))
    assert code == 0, out
    assert [e["offset"] for e in json.loads(out)["files"][0]["entries"]] == [1, 2]
    segment.close()


def test_other_files_are_ignored_with_a_failure_status(tmp_path: Path) -> None:
    other = tmp_path / "leader-epoch-checkpoint"
    other.write_text("0\n0\n")
    code, out = run(str(other))
    assert code == 1 and "not a segment file" in out


def test_registered_as_a_josefk_subcommand() -> None:
    from josefk.cli import main

    assert main.cli.get_command(click.Context(main.cli), "dump-log") is dump_log
