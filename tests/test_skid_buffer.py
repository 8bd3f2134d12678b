"""SkidBuffer (hdl/skid_buffer.py), the one register slice of the core, and its AXI4-Stream
wrapper: every register type, several payload shapes, random valid/ready.

Amaranth simulator (fast): no beat lost, duplicated or reordered; a stalled output holds its
beat; with SIMPLE/SKID no output moves when only inputs change (all from flip-flops); one beat
per cycle when the sink is ready (SIMPLE: one per two cycles). cocotb (marked ``cocotb``): the
generated SystemVerilog of AXIStreamRegisterSlice (SKID and SIMPLE; PASS_THROUGH has no clock)
on the simulator from ``SIM``, with cocotbext-axi frames.
"""

from __future__ import annotations

import random
import re

import pytest
from amaranth.back import verilog
from amaranth.hdl import Cat, Fragment, Shape, signed, unsigned
from amaranth.lib import data
from stream_helpers import (
    Port,
    _yosys_on,
    comb_cells_table,
    count_components,
    drive_random,
    min_flops_between,
)
from twin_helpers import run_twins

from wanreduce.hdl.axis_register_slice import AXIStreamRegisterSlice
from wanreduce.hdl.core import WanreduceCore
from wanreduce.hdl.layouts import message_beat_layout
from wanreduce.hdl.message_demux import MessageDemux
from wanreduce.hdl.reducer import Reducer
from wanreduce.hdl.skid_buffer import RegisterType, SkidBuffer
from wanreduce.sim.simulator import generate_verilog, run_cocotb

TYPES = list(RegisterType)
SHAPES = {
    "u1": unsigned(1),
    "s37": signed(37),
    "struct": data.StructLayout({"a": 3, "b": signed(9), "c": data.ArrayLayout(4, 3)}),
    "message64": message_beat_layout(64),
    "message512": message_beat_layout(512),
}
# (p_valid, p_ready, seed): balanced, sink slower than source (skid register in constant use),
# source slower than sink, both always on
PATTERNS = [(0.5, 0.5, 1), (0.9, 0.3, 2), (0.3, 0.9, 3), (1.0, 1.0, 4)]


def _run(dut, s: Port, m: Port, n: int, p_valid: float, p_ready: float, seed: int, **kw):
    rng = random.Random(seed)
    beats = [rng.getrandbits(len(s.payload)) for _ in range(n)]
    run = drive_random(dut, s, [m], beats, p_valid=p_valid, p_ready=p_ready, seed=seed, **kw)
    return beats, run.received[0], run.cycles


def _skid(shape, register_type: RegisterType, n: int, p_valid: float, p_ready: float, seed: int, **kw):
    dut = SkidBuffer(shape, register_type)
    return _run(dut, Port.of(dut.s), Port.of(dut.m), n, p_valid, p_ready, seed,
                registered=register_type is not RegisterType.PASS_THROUGH, **kw)


def _axis_ports(port) -> Port:
    return Port(port.tvalid, port.tready, Cat(port.tdata, port.tkeep, port.tlast, port.tuser))


@pytest.mark.parametrize("register_type", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize(("p_valid", "p_ready", "seed"), PATTERNS)
def test_every_beat_once_in_order(register_type, shape, p_valid, p_ready, seed) -> None:
    beats, received, cycles = _skid(shape, register_type, 150, p_valid, p_ready, seed)
    assert cycles > 0, f"only {len(received)} of {len(beats)} beats came out"
    assert received == beats


@pytest.mark.parametrize(("register_type", "cycles"), [
    (RegisterType.PASS_THROUGH, 100),  # no latency, a beat every cycle
    (RegisterType.SKID, 101),  # one cycle of latency, then a beat every cycle
    (RegisterType.SIMPLE, 200),  # a bubble after every beat
], ids=lambda x: x.name if isinstance(x, RegisterType) else str(x))
def test_throughput_when_always_ready(register_type: RegisterType, cycles: int) -> None:
    beats, received, used = _skid(message_beat_layout(64), register_type, 100, 1.0, 1.0, seed=6)
    assert received == beats
    assert used == cycles


@pytest.mark.parametrize("register_type", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize(("data_width", "user_width", "p_valid", "p_ready", "seed"), [
    (64, 1, 0.5, 0.5, 1), (64, 3, 0.9, 0.3, 2), (512, 8, 0.3, 0.9, 3), (8, 1, 1.0, 1.0, 4)])
def test_axis_slice_every_beat_once_in_order(register_type, data_width, user_width, p_valid, p_ready,
                                             seed) -> None:
    dut = AXIStreamRegisterSlice(data_width, user_width, register_type)
    beats, received, cycles = _run(dut, _axis_ports(dut.s_axis), _axis_ports(dut.m_axis), 200,
                                   p_valid, p_ready, seed,
                                   registered=register_type is not RegisterType.PASS_THROUGH)
    assert cycles > 0 and received == beats
    if (p_valid, p_ready) == (1.0, 1.0) and register_type is RegisterType.SKID:
        assert cycles == 201


@pytest.mark.parametrize(("data_width", "user_width", "p_valid", "p_ready", "seed"), [
    (64, 1, 0.5, 0.5, 1), (64, 1, 0.9, 0.3, 2), (64, 1, 0.3, 0.9, 3), (64, 1, 1.0, 1.0, 4), (8, 3, 0.7, 0.6, 5)])
def test_axis_slice_ready_copy_every_beat_once_in_order(data_width, user_width, p_valid, p_ready,
                                                        seed) -> None:
    """``ready_copy`` on the AXI4-Stream slice (the Versa DRAM build's input slices behind the
    MACs): every beat once in order, the same cycles as the plain slice, ``copy_error`` low in
    every cycle."""
    def check(ctx, cycle: int) -> None:
        assert not ctx.get(dut.copy_error), f"cycle {cycle}: skid_en differs from tready"

    dut = AXIStreamRegisterSlice(data_width, user_width, ready_copy=True)
    got = _run(dut, _axis_ports(dut.s_axis), _axis_ports(dut.m_axis), 200, p_valid, p_ready, seed,
               each_cycle=check)
    assert got[2] > 0 and got[1] == got[0]
    ref = AXIStreamRegisterSlice(data_width, user_width)
    assert got == _run(ref, _axis_ports(ref.s_axis), _axis_ports(ref.m_axis), 200, p_valid, p_ready,
                       seed)  # cycle for cycle


@pytest.mark.parametrize("ready_copy", [False, True])
def test_axis_slice_tready_reaches_no_skid_register_with_ready_copy(ready_copy: bool) -> None:
    """With ``ready_copy`` no cell from ``s_axis.tready``'s flip-flop (what the MAC's receive FIFO
    reads: ``slice_net_in.skid.s__ready`` -> ``mac0.storage_2_dat1``, 8.20 ns at session 45's
    seed 4) to the skid register: its 74 enables are ``skid_en``'s. Without it (the default;
    193bd2d's DRAM build) ``tready`` drives them: the before-case."""
    dut = AXIStreamRegisterSlice(64, 1, ready_copy=ready_copy)
    table = comb_cells_table(dut, ["skid.s__ready"], ["skid.skid"])  # (s_axis.tready's flip-flop)
    assert bool(sum(table["skid.s__ready", "skid.skid"].values())) != ready_copy, table


def test_skid_register_enable_is_the_registered_ready() -> None:
    """The skid register copies the input in every cycle it is empty (``s.ready`` high),
    whatever ``m.ready`` does: its enable is a flip-flop, ``m.ready`` reaches only the output
    register's enable. ``skid``/``skid_valid`` (read directly by the reducer) are that register."""
    dut = SkidBuffer(unsigned(16))
    seen = []

    def check(ctx, cycle: int) -> None:
        if seen and seen[-1][0]:  # last cycle s.ready was high: the skid register copied s.payload
            assert ctx.get(dut.skid) == seen[-1][1], f"cycle {cycle}: skid register did not load"
        assert ctx.get(dut.skid_valid) == 1 - ctx.get(dut.s.ready)
        seen.append((ctx.get(dut.s.ready), ctx.get(dut.s.payload)))

    beats, received, cycles = _run(dut, Port.of(dut.s), Port.of(dut.m), 200, 0.7, 0.4, 9,
                                   each_cycle=check)
    assert cycles > 0 and received == beats and len(seen) >= cycles




@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize(("p_valid", "p_ready", "seed"), PATTERNS)
def test_ready_copy_every_beat_once_in_order(shape, p_valid, p_ready, seed) -> None:
    """``ready_copy`` (the Versa DRAM core's register slices): the same beats in the same
    order, the same cycles as without, and the skid register's enable (``skid_en``) equals
    ``s.ready`` in every cycle a beat could park (``copy_error`` low)."""
    def check(ctx, cycle: int) -> None:
        assert not ctx.get(dut.copy_error), f"cycle {cycle}: skid_en differs from s.ready"

    dut = SkidBuffer(shape, ready_copy=True)
    got = _run(dut, Port.of(dut.s), Port.of(dut.m), 150, p_valid, p_ready, seed, each_cycle=check)
    assert got[2] > 0 and got[1] == got[0]
    assert got == _skid(shape, RegisterType.SKID, 150, p_valid, p_ready, seed)  # cycle for cycle


@pytest.mark.parametrize("ready_copy", [False, True])
def test_skid_register_enable_is_its_own_copy_with_ready_copy(ready_copy: bool) -> None:
    """With ``ready_copy`` the skid register's enable is ``skid_en``: no cell from ``s.ready``'s
    flip-flop (what the source's logic reads: the parser's read side, 9.47 ns to its descriptor
    head at session 41's seed 3) to the skid register. Without it (the default, RTL unchanged)
    ``s.ready`` drives that enable: the before-case."""
    dut = SkidBuffer(message_beat_layout(64), ready_copy=ready_copy)
    srcs = ["s__ready", "skid_en"] if ready_copy else ["s__ready"]
    table = comb_cells_table(dut, srcs, ["skid", "m__payload"])
    assert bool(sum(table["s__ready", "skid"].values())) != ready_copy, table
    if ready_copy:
        assert sum(table["skid_en", "skid"].values()), table


def test_ready_copy_survives_synthesis() -> None:
    """yosys merges flip-flops with the same input and reset value: ``skid_en`` differs from
    ``s.ready``'s flip-flop in its reset value, so ``synth_ecp5`` keeps it: one flip-flop more
    than without the option (a copy merged away would leave the counts equal)."""
    def flops(ready_copy: bool) -> int:
        (stat,) = _yosys_on(SkidBuffer(unsigned(16), ready_copy=ready_copy),
                            "synth_ecp5 -top dut; tee -q -o stat.txt stat", "stat.txt")
        return sum(int(n) for n in re.findall(r"^\s+(\d+)\s+TRELLIS_FF\s*$", stat, re.M))

    assert flops(True) == flops(False) + 1


def test_dram_core_slices_copy_their_ready() -> None:
    """The DRAM core builds its merger slices, the demux's two buffers, the slice in front of the
    reducer (session 43), the reducer's stage I and the DRAM store's command input (session 43)
    with ``ready_copy`` (the Versa DRAM build's core paths, docs/benchmarks.md session 42); the
    on-chip core none (its RTL pinned by tests/test_default_rtl.py)."""
    def copies(core: WanreduceCore) -> list[str]:
        out, todo = [], [(Fragment.get(core, None), "core")]
        while todo:
            f, name = todo.pop()
            out += [name for o in f.origins or () if isinstance(o, SkidBuffer) and o.ready_copy]
            todo += [(sub, f"{name}.{sub_name}") for sub, sub_name, *_ in f.subfragments]
        return sorted(out)

    kw = dict(ports=2, slots=4, elements=16, groups=1, jobs=1)
    assert copies(WanreduceCore(**kw)) == []
    assert copies(WanreduceCore(**kw, slot_memory="dram")) == [
        "core.demux.control_skid", "core.demux.data_skid", "core.egress_slice", "core.merger_slice0",
        "core.merger_slice1",
        "core.reducer.assembler.out",  # the result assembler's output (ping-pong, session 46)
        "core.reducer.inputs.stage_i",
        "core.reducer.store.cmd_in",  # the store's command input (session 43, the emitter's start)
        "core.reducer_slice"]


@pytest.mark.parametrize("slot_memory", ["onchip", "dram"])
def test_dram_core_egress_ready_reaches_no_result_register(slot_memory: str) -> None:
    """In the DRAM core the register slice in front of the egress framer (``egress_slice``) ends
    ``m_axis_host.tready``'s path within the cycle: the result assembler's output register
    (154 enables) and the egress merger's see it only through the slice's registered ready, two
    flip-flops to their outputs. In the on-chip core (no slice, RTL unchanged) tready ->
    the framer's ``s_msg.ready`` -> the merger -> those enables within the cycle (the Versa DRAM
    build's 11.81 ns at session 42's seed 4): one, the before-case."""
    core = WanreduceCore(ports=1, slots=4, elements=16, groups=1, jobs=1, slot_memory=slot_memory)
    out = ["slot0", "slot1"] if slot_memory == "dram" else ["out_data"]  # (ping_pong in the DRAM core)
    regs = [f"reducer.assembler.out.{r}" for r in out] + ["egress_merger.out_payload"]
    assert min_flops_between(core, ["m_axis_host__tready"], regs) == (2 if slot_memory == "dram" else 1)


@pytest.mark.parametrize("slot_memory", ["onchip", "dram"])
def test_dram_core_reducer_ready_reaches_no_merger_register(slot_memory: str) -> None:
    """In the DRAM core the register slice in front of the reducer (``reducer_slice``) ends the
    reducer's input ready within the cycle: the window reset's ``in_msg`` and stage I's ready
    reach the merger's output register and its grants to its inputs (the merger slices' and the
    demux's output register enables, ~100 bits each) only through the slice's registered
    ready: two flip-flops to their outputs. In the on-chip core (no slice, RTL unchanged) they
    reach them within the cycle (``reducer.inputs.in_msg`` -> ``core.s_msg__1__payload``, 9.02 ns
    at session 42's seed 5, docs/benchmarks.md session 43): one, the before-case."""
    core = WanreduceCore(ports=1, slots=4, elements=16, groups=1, jobs=1, slot_memory=slot_memory)
    srcs = ["reducer.inputs.in_msg", "reducer.inputs.stage_i.in_ready"]
    regs = ["slot0", "slot1"] if slot_memory == "dram" else ["out_data"]  # (ping_pong in the DRAM core)
    dsts = [f"{b}.{r}" for b in ("demux.data_skid", "merger_slice0") for r in regs] + ["merger.out_payload"]
    assert min_flops_between(core, srcs, dsts) == (2 if slot_memory == "dram" else 1)


@pytest.mark.parametrize("ready_copy", [False, True])
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize(("p_valid", "p_ready", "seed"), PATTERNS)
def test_ping_pong_every_beat_once_in_order(shape, p_valid, p_ready, seed, ready_copy) -> None:
    """``ping_pong`` (the DRAM core's merger slices and demux data buffer): every beat once, in
    order, outputs from flip-flops (drive_random's check), the same cycles as the output + skid
    registers; with ``ready_copy`` the slot enables' copies never differ (``copy_error``)."""
    def check(ctx, cycle: int) -> None:
        assert not ctx.get(dut.copy_error), f"cycle {cycle}: a slot enable copy differs"

    dut = SkidBuffer(shape, ping_pong=True, ready_copy=ready_copy)
    got = _run(dut, Port.of(dut.s), Port.of(dut.m), 150, p_valid, p_ready, seed,
               each_cycle=check if ready_copy else None)
    assert got[2] > 0 and got[1] == got[0]
    assert got == _skid(shape, RegisterType.SKID, 150, p_valid, p_ready, seed)  # cycle for cycle


def _lockstep_with_default(dut: SkidBuffer, cycles: int, p_valid: float, p_ready: float, seed: int,
                           check) -> tuple[int, int]:
    """``dut`` side by side with the default ``SkidBuffer`` of its shape on the same inputs (any
    valid / ready / payload every cycle, valid may drop untaken; ``run_twins``): ``s.ready``,
    ``m.valid`` and ``skid_valid`` equal every cycle, ``m.payload`` / ``skid`` whenever valid;
    ``check(ctx, dut, cycle)`` every cycle. Returns the cycles the skid register was full and
    those it drained."""
    seen = [0, 0]

    def value(rng: random.Random, name: str, width: int) -> int:
        p = {"s__valid": p_valid, "m__ready": p_ready}.get(name)
        return rng.getrandbits(width) if p is None else int(rng.random() < p)

    def each_cycle(ctx, ref, new, cycle: int) -> None:
        if ctx.get(ref.skid_valid):
            seen[0] += 1
            seen[1] += ctx.get(ref.m.ready)
        check(ctx, new, cycle)

    run_twins(SkidBuffer(dut.shape), dut, cycles=cycles, seed=seed, value=value,
              valid_of={"m__payload": "m__valid", "skid": "skid_valid"}, each_cycle=each_cycle)
    return seen[0], seen[1]


@pytest.mark.parametrize("ready_copy", [False, True])
@pytest.mark.parametrize(("p_valid", "p_ready", "seed"), [(0.5, 0.5, 11), (0.9, 0.2, 12), (0.2, 0.9, 13),
                                                          (0.8, 0.8, 14)])
def test_ping_pong_in_lockstep_with_the_skid_registers(p_valid, p_ready, seed, ready_copy) -> None:
    """Both buffers side by side on the same inputs, any valid/ready/payload every cycle (valid
    may even drop untaken): ``s.ready``, ``m.valid``, ``skid_valid`` equal every cycle, and
    ``m.payload`` (``skid``) equal whenever ``m.valid`` (``skid_valid``): the same two-entry FIFO."""
    def check(ctx, dut, cycle: int) -> None:
        if ready_copy:
            assert not ctx.get(dut.copy_error), f"cycle {cycle}: a slot enable copy differs"

    full, pop2 = _lockstep_with_default(SkidBuffer(unsigned(12), ping_pong=True, ready_copy=ready_copy),
                                        2000, p_valid, p_ready, seed, check)
    assert full >= 5 and pop2 >= 1  # the two-beat state was exercised


@pytest.mark.parametrize("ping_pong", [False, True])
def test_ping_pong_sink_ready_reaches_no_data_register(ping_pong: bool) -> None:
    """With ``ping_pong`` no cell from ``m.ready`` (the merger's grant in the DRAM core) to any
    data register: it reaches only ``rp``, ``m.valid``, ``s.ready`` and the enable copies. The
    output + skid registers (the default, and db90a43's DRAM core) have ``m.ready`` in the
    output register's enable: the before-case (``merger_slice0.m__valid`` -> merger ->
    ``core.s_msg__1__payload``, 60 endpoints, 9.06 ns at session 44's seed 5)."""
    dut = SkidBuffer(message_beat_layout(64), ping_pong=ping_pong, ready_copy=True)
    regs = ["slot0", "slot1"] if ping_pong else ["m__payload", "skid"]  # (out_data is m__payload)
    table = comb_cells_table(dut, ["m__ready"], regs)
    if ping_pong:
        assert not any(sum(c.values()) for c in table.values()), table
    else:
        assert sum(table["m__ready", "m__payload"].values()), table


def test_ping_pong_needs_skid() -> None:
    with pytest.raises(ValueError, match=r"ping_pong needs register_type SKID, got PASS_THROUGH"):
        SkidBuffer(8, RegisterType.PASS_THROUGH, ping_pong=True)


@pytest.mark.parametrize("slot_memory", ["onchip", "dram"])
def test_dram_core_merger_grant_reaches_no_input_data_register(slot_memory: str) -> None:
    """In the DRAM core the merger's inputs (its slices, the demux's data buffer) are
    ``ping_pong``: the merger's arbitration state and output register (its grant, ``s_msg[i].ready``)
    reach their data registers only through a flip-flop (``rp`` / ``s.ready``): two flip-flops to
    their outputs. In the on-chip core (RTL unchanged, as in db90a43's DRAM core) within the
    cycle, through the output registers' enables: one, the before-case."""
    core = WanreduceCore(ports=1, slots=4, elements=16, groups=1, jobs=1, slot_memory=slot_memory)
    srcs = ["merger.ptr", "merger.locked", "merger.out_valid"]
    regs = (["slot0", "slot1"] if slot_memory == "dram" else ["out_data"])
    dsts = [f"{b}.{r}" for b in ("demux.data_skid", "merger_slice0") for r in regs]
    assert min_flops_between(core, srcs, dsts) == (2 if slot_memory == "dram" else 1)


@pytest.mark.parametrize(("valid_copies", "mux_copies", "ready_copy"), [(1, 2, True), (2, 0, False), (0, 3, False)])
@pytest.mark.parametrize(("p_valid", "p_ready", "seed"), [(0.5, 0.5, 21), (0.9, 0.2, 22), (0.2, 0.9, 23),
                                                          (0.8, 0.8, 24)])
def test_valid_copies_in_lockstep_with_the_default(valid_copies, mux_copies, ready_copy, p_valid, p_ready,
                                                    seed) -> None:
    """``valid_copies`` / ``mux_copies`` (stage I of the Versa DRAM reducer, session 46) side by
    side with the default buffer on the same inputs, any valid/ready/payload every cycle (valid
    may drop untaken), from the reset on: ``s.ready``, ``m.valid``, ``skid_valid`` equal every
    cycle, ``m.payload`` / ``skid`` whenever valid, every copy in ``skid_valid_c`` equal to
    ``skid_valid`` and ``copy_error`` low."""
    def check(ctx, dut, cycle: int) -> None:
        if valid_copies:
            assert ctx.get(dut.skid_valid_c) == ctx.get(dut.skid_valid) * ((1 << valid_copies) - 1), cycle
        assert not ctx.get(dut.copy_error), f"cycle {cycle}: a copy differs"

    dut = SkidBuffer(message_beat_layout(64), ready_copy=ready_copy, valid_copies=valid_copies,
                     mux_copies=mux_copies)
    full, drain = _lockstep_with_default(dut, 1500, p_valid, p_ready, seed, check)
    assert full >= 5 and drain >= 1  # the skid register was used and drained


@pytest.mark.parametrize("mux_copies", [0, 2])
def test_skid_valid_reaches_no_data_register_with_mux_copies(mux_copies: int) -> None:
    """With ``mux_copies`` (and ``valid_copies``) no cell from ``skid_valid``'s flip-flop to
    the output register (its load select is in slices, each by a copy) nor to the user's copy
    ``skid_valid_c``: it reaches only its own state, ``s.ready``/``m.valid`` and ``copy_error``.
    Without (the default, RTL unchanged) it selects every output register bit: the before-case
    (``stage_i.skid_valid`` -> ``inputs.dec_in``, 9.18 ns at main 27983de's seed 1)."""
    dut = SkidBuffer(message_beat_layout(64), ready_copy=True, mux_copies=mux_copies)
    table = comb_cells_table(dut, ["skid_valid"], ["m__payload"])
    assert bool(sum(table["skid_valid", "m__payload"].values())) == (not mux_copies), table
    if mux_copies:
        copies = comb_cells_table(dut, ["skid_valid_c0", "skid_valid_c1"], ["m__payload"])
        assert all(set(+c) == {"$mux"} for c in copies.values()), copies


def test_valid_copies_survive_synthesis() -> None:
    """The copies load ``skid_valid``'s next value from their own state, so yosys does not
    merge them with it: ``synth_ecp5`` keeps one flip-flop per copy (three: one for the user,
    two for the output register's halves; a copy merged away would leave fewer)."""
    def flops(**kw) -> int:
        (stat,) = _yosys_on(SkidBuffer(unsigned(16), **kw), "synth_ecp5 -top dut; tee -q -o stat.txt stat", "stat.txt")
        return sum(int(n) for n in re.findall(r"^\s+(\d+)\s+TRELLIS_FF\s*$", stat, re.M))

    assert flops(valid_copies=1, mux_copies=2) == flops() + 3


@pytest.mark.parametrize(("kw", "msg"), [({"valid_copies": 1, "ping_pong": True}, "need register_type SKID"),
                                         ({"mux_copies": 2, "register_type": RegisterType.SIMPLE}, "need register_type SKID"),
                                         ({"mux_copies": 9}, "mux_copies 0 .. the payload width")])
def test_valid_copies_reject_bad_parameters(kw, msg) -> None:
    kw = dict(kw)
    rt = kw.pop("register_type", RegisterType.SKID)
    with pytest.raises(ValueError, match=msg):
        SkidBuffer(8, rt, **kw)


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize(("p_valid", "p_ready", "seed"), PATTERNS)
def test_mux_copies_every_beat_once_in_order(shape, p_valid, p_ready, seed) -> None:
    """``mux_copies=4``: every beat once in order, outputs from flip-flops, the cycles of the
    plain skid buffer, ``copy_error`` low (u1: one copy, the payload has one bit)."""
    def check(ctx, cycle: int) -> None:
        assert not ctx.get(dut.copy_error), f"cycle {cycle}: a copy differs"

    dut = SkidBuffer(shape, ready_copy=True, mux_copies=min(4, Shape.cast(shape).width))
    got = _run(dut, Port.of(dut.s), Port.of(dut.m), 150, p_valid, p_ready, seed, each_cycle=check)
    assert got[2] > 0 and got[1] == got[0]
    assert got == _skid(shape, RegisterType.SKID, 150, p_valid, p_ready, seed)  # cycle for cycle


def test_dram_core_reducer_slice_selects_in_copies() -> None:
    """The DRAM core's slice in front of the reducer has its output select in four copies (and
    stage I's skid buffer in two, s46a); the other slices none (the on-chip core has no such slice, its RTL pinned)."""
    def copies(core: WanreduceCore) -> dict[str, int]:
        out, todo = {}, [(Fragment.get(core, None), "core")]
        while todo:
            f, name = todo.pop()
            for o in f.origins or ():
                if isinstance(o, SkidBuffer) and o.mux_copies:
                    out[name] = o.mux_copies
            todo += [(sub, f"{name}.{sub_name}") for sub, sub_name, *_ in f.subfragments]
        return out

    kw = dict(ports=2, slots=4, elements=16, groups=1, jobs=1)
    assert copies(WanreduceCore(**kw)) == {}
    assert copies(WanreduceCore(**kw, slot_memory="dram")) == {"core.reducer_slice": 4,
                                                                "core.reducer.inputs.stage_i": 2}


def test_ready_copy_needs_skid() -> None:
    with pytest.raises(ValueError, match=r"ready_copy needs register_type SKID, got SIMPLE"):
        SkidBuffer(8, RegisterType.SIMPLE, ready_copy=True)


def test_one_implementation_everywhere() -> None:
    """The AXI4-Stream slice, the demux (one per output), the reducer's stages I and P, its
    result assembler's output and rows head (a RegisteredFIFO), and the core's merger slices
    are all SkidBuffers (no copy of the logic left to drift)."""
    assert count_components(AXIStreamRegisterSlice(64), SkidBuffer) == 1
    assert count_components(MessageDemux(64), SkidBuffer) == 2
    # stages I and P, the result assembler's output and its rows FIFO's head
    assert count_components(Reducer(64, slots=4, elements=16, groups=1, jobs=1), SkidBuffer) == 4
    # 2 merger slices + 2 in the demux + 4 in the reducer
    assert count_components(WanreduceCore(ports=2, slots=4, elements=16, groups=1, jobs=1), SkidBuffer) == 8


@pytest.mark.parametrize(("args", "msg"), [
    ((8, 1, "BYPASS"), r"register_type must be one of PASS_THROUGH, SIMPLE, SKID, got 'BYPASS'"),
    ((12,), r"data_width must be a multiple of 8"),
])
def test_axis_slice_rejects_bad_parameters(args, msg) -> None:
    with pytest.raises(ValueError, match=msg):
        AXIStreamRegisterSlice(*args)


def test_axis_slice_ready_copy_needs_skid() -> None:
    with pytest.raises(ValueError, match=r"ready_copy needs register_type SKID, got SIMPLE"):
        AXIStreamRegisterSlice(8, 1, "SIMPLE", ready_copy=True)


def test_rejects_bad_register_type() -> None:
    with pytest.raises(ValueError, match=r"register_type must be one of PASS_THROUGH, SIMPLE, SKID, got 2"):
        SkidBuffer(8, 2)  # type: ignore[arg-type]


def test_verilog_message512_ports() -> None:
    text = verilog.convert(SkidBuffer(message_beat_layout(512)), name="skid_buffer")
    width = Shape.cast(message_beat_layout(512)).width
    assert f"[{width - 1}:0] s__payload" in text and "m__ready" in text


# --------------------------------------------------------------------------------------------
# cocotb bench (sim/tb_skid_buffer.py) on the AXI4-Stream slice, the simulator from $SIM


# (PASS_THROUGH is wires, with no clock port to drive the bench from: Amaranth tests only.)
@pytest.mark.cocotb
@pytest.mark.parametrize(("data_width", "user_width", "register_type", "ready_copy"), [
    (64, 1, "SKID", False), (256, 4, "SIMPLE", False), (512, 8, "SKID", False), (64, 1, "SKID", True)])
def test_cocotb_axis_slice(data_width: int, user_width: int, register_type: str, ready_copy: bool) -> None:
    params = {"data_width": data_width, "user_width": user_width, "register_type": register_type,
              **({"ready_copy": True} if ready_copy else {})}  # (the Versa DRAM build's input slices)
    top = "axis_register_slice"
    path = generate_verilog(AXIStreamRegisterSlice, name=top, params=params)
    assert "s_axis__tdata" in path.read_text()
    run_cocotb(verilog=path, toplevel=top, test_module="wanreduce.sim.tb_skid_buffer",
               params={**params, "seed": data_width})


@pytest.mark.parametrize("ready_copy", [False, True])
@pytest.mark.parametrize(("p_valid", "p_ready", "seed"), [(0.5, 0.5, 31), (0.9, 0.2, 32), (0.2, 0.9, 33),
                                                          (0.8, 0.8, 34)])
def test_ping_pong_valid_copy_in_lockstep(p_valid, p_ready, seed, ready_copy) -> None:
    """``valid_copy`` (the DRAM core's demux data buffer, session 47): side by side with the
    default buffer on the same inputs, any valid/ready/payload every cycle from the reset on,
    the same FIFO (``_lockstep_with_default``), ``m_valid_c`` equal to ``m.valid`` every cycle and
    ``copy_error`` low."""
    def check(ctx, dut, cycle: int) -> None:
        assert ctx.get(dut.m_valid_c) == ctx.get(dut.m.valid), f"cycle {cycle}: valid copy differs"
        assert not ctx.get(dut.copy_error), f"cycle {cycle}: a copy differs"

    dut = SkidBuffer(unsigned(12), ping_pong=True, ready_copy=ready_copy, valid_copy=True)
    full, drain = _lockstep_with_default(dut, 1500, p_valid, p_ready, seed, check)
    assert full >= 5 and drain >= 1


def test_ping_pong_valid_copy_survives_synthesis_and_needs_ping_pong() -> None:
    """The copy loads ``m.valid``'s next value from its own state, so ``synth_ecp5`` keeps it: one
    flip-flop more than the buffer without it. Without ``ping_pong`` the option is refused."""
    def flops(**kw) -> int:
        (stat,) = _yosys_on(SkidBuffer(unsigned(16), ping_pong=True, ready_copy=True, **kw),
                            "synth_ecp5 -top dut; tee -q -o stat.txt stat", "stat.txt")
        return sum(int(n) for n in re.findall(r"^\s+(\d+)\s+TRELLIS_FF\s*$", stat, re.M))

    assert flops(valid_copy=True) == flops() + 1
    with pytest.raises(ValueError, match="valid_copy needs ping_pong"):
        SkidBuffer(8, valid_copy=True)
