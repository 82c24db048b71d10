"""The share-partition state machine (KIP-932) on a manual clock: acquisition, locks,
acknowledgements, delivery counts, the in-flight limit; hypothesis for its invariants."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.broker.share.partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRange,
    RecordState,
    SharePartition,
)
from josefk.protocol.errors import ErrorCode

ACCEPT = AcknowledgeType.ACCEPT
RELEASE = AcknowledgeType.RELEASE
REJECT = AcknowledgeType.REJECT


def ack(first: int, last: int, *types: int) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(first, last, tuple(types))]


def test_acquire_new_records_then_nothing_more_for_others() -> None:
    sp = SharePartition(0)
    assert sp.acquire("a", 0, 9, max_records=500, now_ms=0) == [AcquiredRange(0, 9, 1)]
    assert sp.acquire("b", 0, 9, max_records=500, now_ms=0) == []
    assert sp.end_offset == 10 and sp.start_offset == 0


def test_max_records_caps_one_acquisition() -> None:
    sp = SharePartition(0)
    assert sp.acquire("a", 0, 9, max_records=4, now_ms=0) == [AcquiredRange(0, 3, 1)]
    assert sp.acquire("b", 0, 9, max_records=100, now_ms=0) == [AcquiredRange(4, 9, 1)]


def test_accept_moves_the_start_offset() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 0, 9, max_records=500, now_ms=0)
    assert sp.acknowledge("a", ack(0, 4, ACCEPT)) is ErrorCode.NONE
    assert sp.start_offset == 5
    assert sp.state_of(3) is RecordState.ACKNOWLEDGED
    assert sp.state_of(5) is RecordState.ACQUIRED


def test_release_redelivers_with_delivery_count_plus_one() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 0, 2, max_records=500, now_ms=0)
    sp.acknowledge("a", ack(0, 2, ACCEPT, RELEASE, ACCEPT))
    assert sp.state_of(1) is RecordState.AVAILABLE
    assert sp.next_fetch_offset() == 1
    assert sp.acquire("b", 0, 2, max_records=500, now_ms=0) == [AcquiredRange(1, 1, 2)]


def test_reject_is_never_redelivered() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 0, 2, max_records=500, now_ms=0)
    sp.acknowledge("a", ack(1, 1, REJECT))
    assert sp.state_of(1) is RecordState.ARCHIVED
    sp.acknowledge("a", ack(0, 0, RELEASE))
    sp.acknowledge("a", ack(2, 2, RELEASE))
    assert sp.acquire("b", 0, 2, max_records=500, now_ms=0) == [
        AcquiredRange(0, 0, 2),
        AcquiredRange(2, 2, 2),
    ]


def test_released_at_the_delivery_limit_is_archived() -> None:
    sp = SharePartition(0, delivery_count_limit=5)
    for attempt in range(1, 6):
        assert sp.acquire("a", 0, 0, max_records=1, now_ms=0) == [AcquiredRange(0, 0, attempt)]
        sp.acknowledge("a", ack(0, 0, RELEASE))
    assert sp.acquire("a", 0, 0, max_records=1, now_ms=0) == []
    assert sp.state_of(0) is RecordState.ACKNOWLEDGED  # below the start: done with
    assert sp.start_offset == 1


def test_lock_expiry_releases_to_another_member() -> None:
    sp = SharePartition(0, record_lock_duration_ms=30_000)
    sp.acquire("a", 0, 4, max_records=500, now_ms=1000)
    assert sp.acquire("b", 0, 4, max_records=500, now_ms=30_999) == []
    assert sp.acquire("b", 0, 4, max_records=500, now_ms=31_000) == [AcquiredRange(0, 4, 2)]
    # a's acknowledgement comes too late: the records are b's now.
    assert sp.acknowledge("a", ack(0, 4, ACCEPT)) is ErrorCode.INVALID_RECORD_STATE


def test_an_acknowledgement_after_the_lock_is_over_is_refused_and_redelivered() -> None:
    # No fetch came between the lock's end and the late acknowledgement (the member's own next
    # poll carries it): the records are still released and delivered again, count 2.
    sp = SharePartition(0, record_lock_duration_ms=3_000)
    assert sp.acquire("a", 0, 4, max_records=500, now_ms=1000) == [AcquiredRange(0, 4, 1)]
    assert sp.acknowledge("a", ack(0, 4, ACCEPT), now_ms=5000) is ErrorCode.INVALID_RECORD_STATE
    assert sp.acquire("a", 0, 4, max_records=500, now_ms=5000) == [AcquiredRange(0, 4, 2)]
    # Within the lock an acknowledgement is taken.
    assert sp.acknowledge("a", ack(0, 4, ACCEPT), now_ms=7000) is ErrorCode.NONE


def test_renew_restarts_the_lock_of_what_the_member_holds() -> None:
    """KIP-1222: RENEW keeps the records ACQUIRED by the member, locked anew from now."""
    renew = AcknowledgeType.RENEW
    sp = SharePartition(0, record_lock_duration_ms=30_000)
    sp.acquire("a", 0, 4, max_records=500, now_ms=0)
    assert sp.acknowledge("a", ack(0, 2, renew), renew=True, now_ms=20_000) is ErrorCode.NONE
    # At 30 s the lock of 3..4 is over; that of 0..2 runs to 50 s.
    assert sp.acquire("b", 0, 4, max_records=500, now_ms=30_000) == [AcquiredRange(3, 4, 2)]
    assert sp.state_of(1) is RecordState.ACQUIRED
    assert sp.acquire("b", 0, 4, max_records=500, now_ms=49_999) == []
    assert sp.acknowledge("a", ack(0, 2, ACCEPT)) is ErrorCode.NONE
    assert sp.start_offset == 3


def test_renew_only_with_is_renew_ack_and_only_while_held() -> None:
    renew = AcknowledgeType.RENEW
    sp = SharePartition(0, record_lock_duration_ms=30_000)
    sp.acquire("a", 0, 4, max_records=500, now_ms=0)
    # Without is_renew_ack (or before v2) type 4 is unknown.
    assert sp.acknowledge("a", ack(0, 0, renew), now_ms=1) is ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("b", ack(0, 0, renew), renew=True, now_ms=1) is (
        ErrorCode.INVALID_RECORD_STATE
    )
    # A lock already over cannot be renewed: the records went back to AVAILABLE.
    assert sp.acknowledge("a", ack(0, 4, renew), renew=True, now_ms=30_000) is (
        ErrorCode.INVALID_RECORD_STATE
    )
    assert sp.state_of(0) is RecordState.AVAILABLE
    # Renew beside other types, one per offset.
    sp.acquire("a", 0, 4, max_records=500, now_ms=30_000)
    types = (ACCEPT, renew, renew, RELEASE, ACCEPT)
    assert sp.acknowledge("a", ack(0, 4, *types), renew=True, now_ms=40_000) is ErrorCode.NONE
    assert [sp.state_of(o) for o in range(5)] == [
        RecordState.ACKNOWLEDGED,
        RecordState.ACQUIRED,
        RecordState.ACQUIRED,
        RecordState.AVAILABLE,
        RecordState.ACKNOWLEDGED,
    ]
    assert sp.next_lock_deadline_ms() == 70_000


def test_acknowledging_what_one_does_not_hold_is_invalid_record_state() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 0, 4, max_records=500, now_ms=0)
    assert sp.acknowledge("b", ack(0, 0, ACCEPT)) is ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("a", ack(3, 7, ACCEPT)) is ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("a", ack(0, 4, ACCEPT, ACCEPT)) is ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("a", ack(0, 0, 9)) is ErrorCode.INVALID_REQUEST
    assert all(r.state is RecordState.ACQUIRED for r in sp.ranges)


def test_member_leaving_releases_what_it_holds() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 0, 4, max_records=500, now_ms=0)
    sp.acquire("b", 0, 9, max_records=3, now_ms=0)  # new offsets 5..7
    assert sp.release_member("a") == 5
    assert sp.acquire("c", 0, 9, max_records=500, now_ms=0) == [
        AcquiredRange(0, 4, 2),
        AcquiredRange(8, 9, 1),
    ]


def test_in_flight_limit() -> None:
    sp = SharePartition(0, max_record_locks=10)
    assert sp.acquire("a", 0, 99, max_records=500, now_ms=0) == [AcquiredRange(0, 9, 1)]
    assert not sp.acquirable(100)
    assert sp.acquire("b", 0, 99, max_records=500, now_ms=0) == []
    sp.acknowledge("a", ack(0, 3, ACCEPT))
    assert sp.acquire("b", 10, 99, max_records=500, now_ms=0) == [AcquiredRange(10, 13, 1)]


def test_a_read_past_the_end_archives_the_offsets_between() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 0, 1, max_records=500, now_ms=0)
    assert sp.acquire("a", 5, 6, max_records=500, now_ms=0) == [AcquiredRange(5, 6, 1)]
    assert sp.state_of(3) is RecordState.ARCHIVED


def test_ranges_stay_few() -> None:
    sp = SharePartition(0)
    for i in range(100):
        sp.acquire("a", i * 10, i * 10 + 9, max_records=500, now_ms=0)
    sp.acknowledge("a", ack(0, 999, RELEASE))
    assert len(sp.ranges) == 1 and sp.ranges[0].state is RecordState.AVAILABLE


# -- invariants ---------------------------------------------------------------------------

MEMBERS = ("a", "b", "c")
step = st.one_of(
    st.tuples(st.just("fetch"), st.sampled_from(MEMBERS), st.integers(1, 8)),
    st.tuples(
        st.just("ack"),
        st.sampled_from(MEMBERS),
        st.integers(0, 40),
        st.integers(0, 6),
        st.sampled_from([ACCEPT, RELEASE, REJECT]),
    ),
    st.tuples(st.just("tick"), st.integers(0, 20_000)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(step, max_size=60))
def test_no_offset_held_twice_and_settled_never_again(steps: list[tuple[object, ...]]) -> None:
    sp = SharePartition(
        0, record_lock_duration_ms=15_000, delivery_count_limit=3, max_record_locks=20
    )
    now = 0
    log_end = 40
    # The model: who holds each offset and until when.
    holder: dict[int, tuple[str, int]] = {}
    settled: set[int] = set()
    deliveries: dict[int, int] = {}
    for s in steps:
        kind = s[0]
        if kind == "fetch":
            member, n = s[1], s[2]
            assert isinstance(member, str) and isinstance(n, int)
            holder = {o: h for o, h in holder.items() if h[1] > now}
            start = sp.next_fetch_offset()
            got = sp.acquire(member, start, log_end - 1, max_records=n, now_ms=now)
            for a in got:
                for o in range(a.first_offset, a.last_offset + 1):
                    assert o not in settled
                    assert o not in holder, f"{o} acquired while {holder[o][0]} holds it"
                    holder[o] = (member, now + 15_000)
                    deliveries[o] = deliveries.get(o, 0) + 1
                    assert a.delivery_count == deliveries[o] <= 3
        elif kind == "ack":
            member, first, length, t = s[1], s[2], s[3], s[4]
            assert isinstance(member, str) and isinstance(first, int) and isinstance(length, int)
            before = {o: sp.state_of(o) for o in range(first, first + length + 1)}
            error = sp.acknowledge(member, ack(first, first + length, int(t)))  # type: ignore[call-overload]
            if error is ErrorCode.NONE:
                for o in before:
                    holder.pop(o, None)
                    if t is not RELEASE or deliveries.get(o, 0) >= 3:
                        settled.add(o)
            else:
                assert {o: sp.state_of(o) for o in before} == before
        elif kind == "tick":
            assert isinstance(s[1], int)
            now += s[1]
        else:
            member = s[1]
            assert isinstance(member, str)
            sp.release_member(member)
            holder = {o: h for o, h in holder.items() if h[0] != member}
        for o in settled:
            assert sp.state_of(o) in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        ranges = sp.ranges
        assert all(r.first_offset <= r.last_offset for r in ranges)
        assert all(x.last_offset + 1 == y.first_offset for x, y in itertools.pairwise(ranges))
        if ranges:
            assert ranges[0].first_offset == sp.start_offset
            assert ranges[-1].last_offset + 1 == sp.end_offset
        assert sp.end_offset - sp.start_offset <= 20
