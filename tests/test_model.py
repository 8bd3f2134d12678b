"""The golden model's aggregation semantics and ingress checks, case by case."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wanreduce import wire
from wanreduce.model import (
    AggregatorModel,
    Drop,
    Message,
    Outcome,
    PortConfig,
    ReleaseMode,
    parse_frame,
)
from wanreduce.sim.frames import fix_ip_checksum

E = 8


def msg(chunk, sender, values=None, *, job=0, group=0, round_id=0, scale=0, count=E):
    v = np.full(count, sender + 1, np.int32) if values is None else np.asarray(values, np.int32)
    return Message(wire.MsgType.CONTRIBUTION, 0, group, job, round_id, chunk, sender, scale, count, v)


def model(slots=4, release=ReleaseMode.IN_ORDER, members=0b111, jobs=2):
    m = AggregatorModel(slots=slots, elements=E, groups=4, jobs=jobs, release=release)
    m.set_group(0, members)
    m.set_job(0, enabled=True)
    return m


def test_complete_chunk_releases_sum():
    m = model()
    assert m.contribute(msg(0, 0)) == (Outcome.AGGREGATED, [])
    assert m.contribute(msg(0, 1))[1] == []
    out, res = m.contribute(msg(0, 2))
    assert out == Outcome.AGGREGATED and len(res) == 1
    assert np.array_equal(res[0].payload, np.full(E, 6)) and not res[0].overflow


def test_duplicates_change_nothing():
    m = model()
    m.contribute(msg(0, 0))
    assert m.contribute(msg(0, 0, np.full(E, 100)))[0] == Outcome.DUPLICATE
    m.contribute(msg(0, 1))
    res = m.contribute(msg(0, 2))[1]
    assert np.array_equal(res[0].payload, np.full(E, 6))


def test_non_member_and_unconfigured_rejected():
    m = model(members=0b011)
    assert m.contribute(msg(0, 2))[0] == Outcome.REJECT_NON_MEMBER
    assert m.contribute(msg(0, 0, group=1))[0] == Outcome.REJECT_UNCONFIGURED
    assert m.contribute(msg(0, 0, job=1))[0] == Outcome.REJECT_UNCONFIGURED
    assert m.contribute(msg(0, 0, job=7))[0] == Outcome.REJECT_UNCONFIGURED


def test_busy_slot_is_never_overwritten_in_completion_mode():
    m = model(release=ReleaseMode.ON_COMPLETION)
    m.contribute(msg(1, 0))
    assert m.contribute(msg(5, 0))[0] == Outcome.REJECT_BUSY  # 5 mod 4 == 1, chunk 1 unfinished
    m.contribute(msg(1, 1))
    assert np.array_equal(m.contribute(msg(1, 2))[1][0].payload, np.full(E, 6))


def test_in_order_release_and_out_of_window():
    m = model()
    for s in range(3):
        assert m.contribute(msg(1, s))[1] == []  # chunk 1 complete but head is 0
    assert m.contribute(msg(4, 0))[0] == Outcome.OUT_OF_WINDOW  # head 0 + window 4
    m.contribute(msg(0, 0))
    m.contribute(msg(0, 1))
    res = m.contribute(msg(0, 2))[1]
    assert [r.chunk for r in res] == [0, 1]  # head chunk releases, then the waiting one
    assert m.job_table[0].head == 2


def test_on_completion_release_out_of_order():
    m = model(release=ReleaseMode.ON_COMPLETION)
    for s in range(3):
        res = m.contribute(msg(2, s))[1]
    assert [r.chunk for r in res] == [2]


def test_lost_result_recovery_and_stale():
    m = model()
    for s in range(3):
        m.contribute(msg(0, s))
    out, res = m.contribute(msg(0, 1))  # retransmission after release: result sent again
    assert out == Outcome.RESULT_RESENT and res[0].resent and res[0].flags & wire.Flags.RESENT
    assert np.array_equal(res[0].payload, np.full(E, 6))
    for s in range(3):
        m.contribute(msg(4, s))  # chunk 4 reuses slot 0
    assert m.contribute(msg(0, 1))[0] == Outcome.STALE  # its result is gone now


def test_mismatch_rejected():
    m = model()
    m.contribute(msg(0, 0, scale=3))
    assert m.contribute(msg(0, 1, scale=4))[0] == Outcome.REJECT_MISMATCH
    assert m.contribute(msg(0, 1, round_id=1, scale=3))[0] == Outcome.REJECT_MISMATCH
    assert m.contribute(msg(0, 1, count=4, values=np.ones(4), scale=3))[0] == Outcome.REJECT_MISMATCH


def test_saturation_is_sticky_and_flagged():
    m = model(members=0b11)
    m.contribute(msg(0, 0, np.full(E, wire.INT32_MAX)))
    res = m.contribute(msg(0, 1, np.full(E, 1)))[1]
    assert res[0].overflow and np.all(res[0].payload == wire.INT32_MAX)


def test_jobs_are_isolated():
    m = model(slots=8)
    m.set_job(0, enabled=True, base=0, log2_window=2)
    m.set_job(1, enabled=True, base=4, log2_window=2)
    m.contribute(msg(0, 0, job=0))
    m.contribute(msg(0, 0, np.full(E, 50), job=1))
    m.contribute(msg(0, 1, job=0))
    r0 = m.contribute(msg(0, 2, job=0))[1]
    assert np.array_equal(r0[0].payload, np.full(E, 6)) and r0[0].job_id == 0


def test_window_reset_frees_slots():
    m = model()
    m.contribute(msg(0, 0))
    m.reset_window(0, head=100)
    assert m.job_table[0].head == 100
    assert m.contribute(msg(100, 0))[0] == Outcome.AGGREGATED  # slot 0 was freed
    assert m.contribute(msg(99, 0))[0] == Outcome.STALE  # behind the head


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 11), st.integers(0, 4)), max_size=120), st.booleans())
def test_every_input_is_accounted_for(events, completion):
    m = model(slots=4, members=0b1111, release=ReleaseMode.ON_COMPLETION if completion else ReleaseMode.IN_ORDER)
    for chunk, sender in events:
        m.contribute(msg(chunk, sender))
    assert sum(m.counters.values()) == len(events)
    assert m.results_out >= m.counters[Outcome.RESULT_RESENT]


@settings(max_examples=50, deadline=None)
@given(st.permutations(list(range(4))), st.integers(0, 3))
def test_result_independent_of_arrival_order_and_duplicates(order, dup):
    m = model(members=0b1111, release=ReleaseMode.ON_COMPLETION)
    rng = np.random.default_rng(0)
    vals = [rng.integers(-1000, 1000, E) for _ in range(4)]
    results = []
    for i, s in enumerate(order):
        results += m.contribute(msg(0, s, vals[s]))[1]
        if i == 0:
            assert m.contribute(msg(0, s, vals[dup]))[0] == Outcome.DUPLICATE
    assert len(results) == 1
    assert np.array_equal(results[0].payload, np.sum(vals, axis=0))


# ---- ingress checks ------------------------------------------------------------------------

CFG = PortConfig(local_mac=0x020000000001, local_ip=0x0A000001, max_elements=16)


def good(count=4, **agg):
    fields = dict(msg_type=wire.MsgType.CONTRIBUTION, chunk=3, sender_id=1, element_count=count)
    fields.update(agg)
    return bytearray(wire.frame(wire.AggHeader(**fields), np.arange(count), wire.L2L3()))



def corrupt(offset, value):
    f = good()
    f[offset] = value
    return fix_ip_checksum(f) if offset < 34 and offset not in (24, 25) else f


@pytest.mark.parametrize(
    "frame, reason",
    [
        (good()[:40], Drop.TRUNCATED),
        (corrupt(12, 0x86), Drop.ETHERTYPE),
        (corrupt(14, 0x46), Drop.IP_HEADER),
        (corrupt(20, 0x60), Drop.IP_HEADER),  # MF | DF
        (corrupt(23, 6), Drop.IP_HEADER),
        (corrupt(24, 0x00), Drop.IP_CHECKSUM),
        (corrupt(0, 0x04), Drop.DESTINATION),  # unicast MAC, not ours
        (corrupt(33, 0x09), Drop.DESTINATION),
        (corrupt(37, 0x00), Drop.UDP_PORT),
        (corrupt(42, 0x00), Drop.AGG_HEADER),
        (corrupt(44, 2), Drop.AGG_HEADER),
        (good(msg_type=wire.MsgType.CONTROL), Drop.AGG_HEADER),
        (good(count=17), Drop.ELEMENT_COUNT),
        (good()[:-4], Drop.LENGTH),
        (good() + b"\0\0\0\0", Drop.LENGTH),
        (corrupt(61, 5), Drop.LENGTH),
    ],
)
def test_each_drop_reason(frame, reason):
    assert parse_frame(bytes(frame), CFG) == reason


def test_frame_error_wins_and_good_frames_parse():
    assert parse_frame(bytes(good()), CFG, frame_error=True) == Drop.FRAME_ERROR
    m = parse_frame(bytes(good()), CFG)
    assert isinstance(m, Message) and m.chunk == 3 and list(m.payload) == [0, 1, 2, 3]
    mc = good()
    mc[0:6] = wire.multicast_mac(0xE0000001).to_bytes(6, "big")
    mc[30:34] = (0xE0000001).to_bytes(4, "big")
    assert isinstance(parse_frame(bytes(fix_ip_checksum(mc)), CFG), Message)
    ctrl = good(msg_type=wire.MsgType.CONTROL)
    accept = (wire.MsgType.CONTRIBUTION, wire.MsgType.CONTROL)
    assert parse_frame(bytes(ctrl), CFG, accept=accept).msg_type == wire.MsgType.CONTROL


@pytest.mark.parametrize("max_elements", [0, 1, 16])
def test_control_bounded_by_elements_not_max_elements(max_elements):
    """ELEMENT_COUNT: contributions obey MAX_ELEMENTS, CONTROL messages only E (issue 12, item 2)."""
    cfg = PortConfig(local_mac=CFG.local_mac, local_ip=CFG.local_ip, max_elements=max_elements,
                     elements=16)
    accept = (wire.MsgType.CONTRIBUTION, wire.MsgType.CONTROL)
    for count in (2, 16):
        ctrl = parse_frame(bytes(good(count, msg_type=wire.MsgType.CONTROL)), cfg, accept=accept)
        assert isinstance(ctrl, Message) and ctrl.element_count == count
        contrib = parse_frame(bytes(good(count)), cfg, accept=accept)
        assert (contrib == Drop.ELEMENT_COUNT) == (count > max_elements)
    too_long = good(17, msg_type=wire.MsgType.CONTROL)
    assert parse_frame(bytes(too_long), cfg, accept=accept) == Drop.ELEMENT_COUNT
    assert parse_frame(bytes(good(0, msg_type=wire.MsgType.CONTROL)), cfg,
                       accept=accept) == Drop.ELEMENT_COUNT


def test_constructor_validation():
    with pytest.raises(ValueError, match="power of two"):
        AggregatorModel(slots=6, elements=8)
    with pytest.raises(ValueError, match="elements"):
        AggregatorModel(slots=4, elements=0)
