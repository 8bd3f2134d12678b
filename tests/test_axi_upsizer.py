"""AXI4 upconverter (hdl/axi_upsizer.py): parameter errors, and the cocotb bench
(sim/tb_axi_upsizer.py) of a narrow AxiMaster through it onto a wide AxiRam with random
backpressure on every channel, 64 -> 128 (the Versa's DDR3 port) and 64 -> 512 (the AX7325B's)."""

from __future__ import annotations

import pytest
from stream_helpers import comb_cells_between, comb_cells_table, comb_cone, run_testbench
from twin_helpers import run_twins

from wanreduce.hdl.axi4 import AxiBurst, axi4_port
from wanreduce.hdl.axi_upsizer import AxiUpsizer
from wanreduce.sim.simulator import generate_verilog, run_cocotb

TB = "wanreduce.sim.tb_axi_upsizer"


@pytest.mark.parametrize(("args", "kw", "msg"), [
    ((48, 128), {}, "narrow_width must be a power of two"),
    ((128, 64), {}, "wide_width must be >= narrow_width"),
    ((64, 128), {"addr_width": 8}, "addr_width must be 12..64"),
    ((64, 128), {"depth": 1}, "depth must be >= 2"),
])
def test_rejects_bad_parameters(args, kw, msg) -> None:
    with pytest.raises(ValueError, match=msg):
        AxiUpsizer(*args, **kw)


def _dut(narrow: int, wide: int):
    params = {"narrow_width": narrow, "wide_width": wide, "addr_width": 16, "id_width": 1}
    top = f"axi_upsizer_{narrow}_{wide}"
    return params, generate_verilog(AxiUpsizer, name=top, params=params), top


@pytest.mark.cocotb
@pytest.mark.parametrize(("narrow", "wide", "seed"), [(64, 128, 1), (64, 512, 2)])
def test_cocotb_random_transfers(narrow: int, wide: int, seed: int) -> None:
    params, path, top = _dut(narrow, wide)
    run_cocotb(verilog=path, toplevel=top, test_module=TB, testcase="random_transfers",
               params={**params, "seed": seed, "ops": 25})


@pytest.mark.cocotb
def test_cocotb_one_narrow_beat_per_cycle() -> None:
    params, path, top = _dut(64, 128)
    run_cocotb(verilog=path, toplevel=top, test_module=TB, testcase="throughput",
               params={**params, "seed": 3})


def test_narrow_w_reaches_only_its_input_register() -> None:
    """The manager's W (valid, last, data) enters through a skid buffer: the lane choice, the
    accumulator's enables and the wide beat's valid are decided from flip-flops. Before, the
    DRAM store's wlast (its beat count against the burst length) ran on through them into 72
    enables: the Versa DRAM build's core path at vdram22's seed 2 (9.6 ns; docs/benchmarks.md)."""
    sources, _ = comb_cone(AxiUpsizer(64, 128), "w_out.s__valid")
    assert not {s for s in sources if s.startswith("s_axi_w")}, sorted(sources)
    sources, _ = comb_cone(AxiUpsizer(64, 128), "s_axi_wready")
    assert not {s for s in sources if s.startswith("s_axi_")}, sorted(sources)


def test_wide_data_register_does_not_wait_for_the_wide_beats_ready() -> None:
    """The wide data register (``acc``) loads a waiting beat's lane whether or not the wide beat
    may leave (``w_out``'s ready): its enable is decided without that flip-flop (w_out.s__ready
    -> ``take`` -> the 128 enables of ``acc``, 8.23 ns at session 44's seed 3; before, ``take``
    was in it). Exact: the waiting beat stays on w_in until taken, and only its own lane is
    written (the cocotb random transfers check the memory)."""
    assert not comb_cells_between(AxiUpsizer(64, 128), "w_out.s__ready", "acc")
    assert comb_cells_between(AxiUpsizer(64, 128), "w_out.s__ready", "acc_strb")  # (its strobes do)


def _reads_returned(order: list[int]) -> tuple[int, list[tuple[int, int]]]:
    """Two read bursts through a 64 -> 128 upsizer, ID 0 (2 narrow beats from lane 0: one wide
    beat) then ID 1 (4 narrow beats from lane 1: three wide beats), the memory returning the
    bursts' wide beats in ``order`` of IDs (each burst's beats together, with its RID); the
    upsizer's ``error`` after, and the narrow beats (rid, rlast) it gave."""
    dut = AxiUpsizer(64, 128, addr_width=16, id_width=1)
    s, w = axi4_port(dut, "s_axi"), axi4_port(dut, "m_axi")
    beats = {0: 1, 1: 3}  # wide beats per burst
    out: list[tuple[int, int]] = []

    async def tb(ctx) -> None:
        ctx.set(w.arready, 1)
        ctx.set(s.rready, 1)
        for i, addr, length in ((0, 0x100, 1), (1, 0x208, 3)):
            ctx.set(s.arvalid, 1)
            ctx.set(s.arid, i)
            ctx.set(s.araddr, addr)
            ctx.set(s.arlen, length)
            ctx.set(s.arsize, 3)
            ctx.set(s.arburst, AxiBurst.INCR)
            await ctx.tick().until(s.arready)
        ctx.set(s.arvalid, 0)
        for i in order:
            for k in range(beats[i]):
                ctx.set(w.rvalid, 1)
                ctx.set(w.rid, i)
                ctx.set(w.rlast, k == beats[i] - 1)
                while True:
                    await ctx.tick()
                    if ctx.get(s.rvalid):
                        out.append((ctx.get(s.rid), ctx.get(s.rlast)))
                    if ctx.get(w.rready):
                        break
        ctx.set(w.rvalid, 0)
        for _ in range(12):
            await ctx.tick()
            if ctx.get(s.rvalid):
                out.append((ctx.get(s.rid), ctx.get(s.rlast)))
        out.append(("error", ctx.get(dut.error)))

    run_testbench(dut, tb)
    return out[-1][1], out[:-1]


def test_read_with_another_bursts_id_is_an_error() -> None:
    """The upsizer pairs each wide R burst with the oldest read's lane and length (in order):
    a memory path that returned a younger burst of another ID first would be unpacked with the
    wrong lane and length, silently. The RID is checked against the ID queued with the burst
    it is paired with: a mismatch sets the sticky ``error``; in AR order none does."""
    error, beats = _reads_returned([0, 1])
    assert error == 0
    assert beats == [(0, 0), (0, 1), (1, 0), (1, 0), (1, 0), (1, 1)], beats
    error, _ = _reads_returned([1, 0])
    assert error == 1


def test_wide_r_register_enables_are_flip_flops() -> None:
    """The wide R input register is a ping-pong SkidBuffer with its own enable flip-flops
    (``r_ping_pong``, the default): the unpacking's state (``left``, ``pos``, ``first``, the lane
    FIFO's head) and the manager's RREADY reach no data register's enable (``r_data`` -> ``left``
    -> ``pos`` -> ... -> ``mem_upsizer.m__payload``, 8.21 ns at main 193bd2d's seed 5), and the
    input's ready flip-flop (which LiteDRAM's read-data CDC FIFO reads: ``r_in.s__ready`` ->
    ``clockdomaincrossing4_cdc_rdport_dat_r``, 16 endpoints, 8.19 ns at seed 4) drives none
    either. Fails on 193bd2d (no ``r_in.slot0``: the output register's enable was
    ``~valid | m.ready``, the unpacking's ``last`` in it)."""
    dut = AxiUpsizer(64, 128)
    comb_cone(dut, "r_in.slot0")  # (asserts the ping-pong slots are there)
    srcs = ["left", "pos", "first", "ar_lanes.r_data", "s_axi_rready", "r_in.s__ready"]
    regs = ["r_in.slot0", "r_in.slot1"]
    table = comb_cells_table(dut, srcs, regs)
    assert not any(table.values()), {k: dict(v) for k, v in table.items() if v}
    # (the unpacking does still reach the read pointer: the cut moved it, not lost it)
    assert comb_cells_between(AxiUpsizer(64, 128), "left", "r_in.rp")


def _upsizer_value(rng, name: str, width: int) -> int:
    """Random inputs within what the upsizer supports (INCR bursts of full narrow beats, ID 0,
    so that ``error`` stays 0 and would show the enable copies' check), the rest random bits."""
    fixed = {"s_axi_arburst": 1, "s_axi_awburst": 1, "s_axi_arsize": 3, "s_axi_awsize": 3,
             "s_axi_arid": 0, "s_axi_awid": 0, "m_axi_rid": 0}
    if name in fixed:
        return fixed[name]
    if name in ("s_axi_arlen", "s_axi_awlen"):
        return rng.choice([0, 1, 2, 3, 7])
    if name.endswith(("valid", "ready")):
        return int(rng.random() < 0.6)
    return rng.getrandbits(width)


@pytest.mark.parametrize(("wide", "seed"), [(128, 1), (256, 2)])
def test_ping_pong_r_input_is_exact(wide: int, seed: int) -> None:
    """``r_ping_pong`` against the plain SKID register (193bd2d's logic) on the same random
    inputs, 3000 cycles: every output equal in every cycle (the narrow R payload while RVALID),
    and ``error`` 0 in both (the enable copies never differ)."""
    def no_error(ctx, old, new, cycle) -> None:
        assert ctx.get(new.error) == 0, f"cycle {cycle}: error"

    run_twins(AxiUpsizer(64, wide, addr_width=16, r_ping_pong=False),
              AxiUpsizer(64, wide, addr_width=16), cycles=3000, seed=seed, value=_upsizer_value,
              valid_of={n: "s_axi_rvalid" for n in ("s_axi_rdata", "s_axi_rresp", "s_axi_rid")},
              each_cycle=no_error)
