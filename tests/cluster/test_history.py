"""The history checker finds each anomaly it names, and none in a clean history."""

from __future__ import annotations

from history import History


def clean() -> History:
    return History(
        sent=[b"a", b"b", b"c"],
        acked=[(0, 0, b"a"), (0, 1, b"b")],
        polled=[(0, 0, b"a"), (0, 1, b"b"), (0, 2, b"c")],
    )


def test_a_clean_history_has_no_anomalies() -> None:
    clean().check()


def test_each_anomaly_is_found() -> None:
    lost = clean()
    lost.polled = [(0, 0, b"a")]
    assert any(a.startswith("lost write: b'b'") for a in lost.anomalies())

    duplicate = clean()
    duplicate.polled.append((0, 3, b"a"))
    assert any(a.startswith("duplicate: b'a'") for a in duplicate.anomalies())

    moved = clean()
    moved.polled = [(0, 0, b"a"), (0, 2, b"b")]
    assert any("acknowledged at 0:1, read at [(0, 2)]" in a for a in moved.anomalies())

    backwards = clean()
    backwards.polled = [(0, 1, b"b"), (0, 0, b"a")]
    assert any(a.startswith("non-monotonic poll") for a in backwards.anomalies())

    phantom = clean()
    phantom.polled.append((0, 5, b"z"))
    assert any(a.startswith("phantom: b'z'") for a in phantom.anomalies())
