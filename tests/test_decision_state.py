"""The engine's late operand (hdl/dram_rmw_engine.py, "Late operand") and its owner
``DecisionState`` (hdl/decision_state.py): the state read a cycle ahead, written from the effect,
bypassed for back-to-back commands (Amaranth's simulator, against a Python model); the owner's
wiring checks; the scaffold modify's late operand against its Python twin; and the
scaffold engine with a ``DecisionState`` on cocotbext-axi's AxiRam with random latency and
backpressure (sim/tb_slot_store.py), every response and the final state against the twin. The
engine's own late-operand checks (ports, the modify's signature) are in test_dram_rmw_engine.py."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator
from stream_helpers import pack, run_testbench

from wanreduce.hdl.decision_state import (
    CHUNK_BITS,
    DecisionState,
    connect_owner,
    effect_layout,
    late_layout,
)
from wanreduce.hdl.dram_rmw_engine import LATE_PORTS, DramRmwEngine
from wanreduce.hdl.engine_with_state import EngineWithState
from wanreduce.hdl.pending_words import PendingOp
from wanreduce.hdl.record_modify_scaffold import ScaffoldRecordModify
from wanreduce.hdl.scaffold_engine_harness import ScaffoldEngineHarness, scaffold_engine
from wanreduce.hdl.slot_store_signature import Op
from wanreduce.sim.record_model import (
    RecordModel,
    region_slot,
    release_parts,
    release_run,
    scaffold_effect,
    scaffold_update,
)
from wanreduce.sim.simulator import generate_verilog, run_cocotb

SLOTS = 256  # four 64-bit pending words, two banks


def _run_state(slots: int, jobs: int, n: int, seed: int, p_gap: float) -> tuple[list, list, list]:
    """Random commands on few slots (some sharing a word) and every job; each effect random; the
    late operand each saw against the model (heads and pending bits with every earlier effect)."""
    rng = random.Random(seed)
    hot = [3, 5, 64 + 7, 130, slots - 1]
    heads, pending = [(0, 0)] * jobs, [0] * slots
    commands, want = [], []
    for _ in range(n):
        job, slot = rng.randrange(jobs), rng.choice(hot)
        want.append((*heads[job], pending[slot]))
        fx = {"head_we": rng.random() < 0.5, "head": {"chunk": rng.getrandbits(CHUNK_BITS),
                                                      "slot": rng.randrange(slots)},
              "pending_we": rng.random() < 0.7, "pending": rng.getrandbits(1)}
        if fx["head_we"]:
            heads[job] = (fx["head"]["chunk"], fx["head"]["slot"])
        if fx["pending_we"]:
            pending[slot] = fx["pending"]
        commands.append((job, slot, fx))
    gaps = [0 if rng.random() > p_gap else rng.randint(1, 3) for _ in commands]
    return commands, gaps, want


def _simulate(slots: int, jobs: int, commands: list, gaps: list[int]) -> tuple[list, list, bool]:
    """The engine's timing: command k's look-ahead in cycle t_k, its C2 in t_k + 1; t_{k+1} =
    t_k + 1 + gaps[k + 1] (gap 0: back to back in C2), ``c0_slot`` its slot in t_k - 1 (as it
    fires). Returns the late operand each command saw, the distance in cycles to the last effect
    on its job's head / its slot (0: > 3), and ``error`` at the end."""
    dut = DecisionState(slots=slots, jobs=jobs)
    lay = effect_layout(slots)
    t_ahead, t = [], 0  # the first look-ahead in cycle 1 or later: its C0 cycle in the run
    for g in gaps:
        t = t + 1 + g
        t_ahead.append(t)
    by_ahead = {tk: k for k, tk in enumerate(t_ahead)}
    by_c2 = {tk + 1: k for k, tk in enumerate(t_ahead)}
    seen, dist, error = [None] * len(commands), [None] * len(commands), []

    async def tb(ctx):
        last_head, last_pend = {}, {}
        for cycle in range(t_ahead[-1] + 4):
            k = by_ahead.get(cycle + 1)  # C0's slot: the command firing now (its look-ahead next cycle)
            if k is not None:
                ctx.set(dut.c0_slot, commands[k][1])
            k = by_ahead.get(cycle)
            ctx.set(dut.ahead_valid, k is not None)
            if k is not None:
                ctx.set(dut.ahead_job, commands[k][0])
                ctx.set(dut.ahead_slot, commands[k][1])
            k = by_c2.get(cycle)
            ctx.set(dut.effect_valid, k is not None)
            if k is not None:
                job, slot, fx = commands[k]
                late = ctx.get(dut.late)
                seen[k] = (late.head.chunk, late.head.slot, late.pending)
                d = (cycle - last_head.get(job, -9), cycle - last_pend.get(slot, -9))
                dist[k] = tuple(x if x <= 3 else 0 for x in d)
                ctx.set(dut.effect.as_value(), pack(lay, fx))
                if fx["head_we"]:
                    last_head[job] = cycle
                if fx["pending_we"]:
                    last_pend[slot] = cycle
            await ctx.tick()
        error.append(ctx.get(dut.error))

    run_testbench(dut, tb)
    return seen, dist, bool(error[0])


@pytest.mark.parametrize(("jobs", "p_gap", "seed"), [(1, 0.2, 1), (2, 0.3, 2), (4, 0.1, 3), (3, 0.5, 4)])
def test_late_operand_is_current_at_c2(jobs: int, p_gap: float, seed: int) -> None:
    """Random commands, mostly back to back, on five slots (two in one word, three banks' words)
    and every job, random effects: each command's late operand is its job's head and its slot's
    pending bit with every earlier command's effect applied: read (the head: the effect two or
    more cycles back; the pending bit, read as the command leaves C0: four or more), bypassed
    from the effect one cycle back (head and pending, at C2), and for the pending bit two and
    three cycles back (at C1, from ``fx`` and ``fx2``: ``PendingWords`` writes a cycle later).
    Each path is taken."""
    commands, gaps, want = _run_state(SLOTS, jobs, 400, seed, p_gap)
    seen, dist, error = _simulate(SLOTS, jobs, commands, gaps)
    for k, (got, w) in enumerate(zip(seen, want, strict=True)):
        assert got == w, f"command {k} (job {commands[k][0]}, slot {commands[k][1]}, last effect on head / " \
                         f"pending {dist[k]} cycles back): late {got}, want {w}"
    assert not error
    for i, what in ((0, "head"), (1, "pending")):
        for d in (1, 2, 3):
            assert sum(x[i] == d for x in dist) > 10, f"few {what} effects {d} cycle(s) back"


def test_error_when_effect_and_look_ahead_disagree() -> None:
    """An effect without a look-ahead the cycle before (the engine's contract broken) sets the
    sticky ``error``; the look-ahead then its effect does not."""
    dut = DecisionState(slots=16, jobs=2)

    async def tb(ctx):
        ctx.set(dut.ahead_valid, 1)
        await ctx.tick()
        ctx.set(dut.ahead_valid, 0)
        ctx.set(dut.effect_valid, 1)
        await ctx.tick()
        assert not ctx.get(dut.error)
        await ctx.tick()  # effect_valid still high: no look-ahead for it
        ctx.set(dut.effect_valid, 0)
        await ctx.tick()
        assert ctx.get(dut.error)

    run_testbench(dut, tb)


@pytest.mark.parametrize("scan_stages", [1, 3, 5])
def test_peek_waits_for_a_head_read_with_a_command_in_c0(scan_stages: int) -> None:
    """A release candidate entering an empty C0 is held one cycle before its PEEK, even when C0's
    payload without a command already named its job: the head read for that payload is not used
    (an empty C0's payload is no value: X in Icarus, where using it hung the cocotb bench
    below with no response at all). The cycle after, with nothing in flight, the PEEK goes and
    the candidate may leave C0: in the PEEK's cycle with one scan stage, two cycles later with
    three (its answer comes in its S2, registered for the candidate's C2)."""
    dut = DecisionState(slots=128, jobs=2, scan_stages=scan_stages)

    async def tb(ctx):
        ctx.set(dut.c0_valid, 0)
        ctx.set(dut.c0_job, 1)  # a payload without a command
        ctx.set(dut.c0_release, 1)
        for _ in range(3):
            await ctx.tick()
        ctx.set(dut.c0_valid, 1)  # the candidate: its job's head is the one read, C0 was empty
        assert ctx.get(dut.hold)
        await ctx.tick()
        assert ctx.get(dut.pending.op.valid) and ctx.get(dut.pending.op.payload.kind) == PendingOp.PEEK
        for _ in range(scan_stages - 1):  # three stages: held through the PEEK's R and S1 (five: P1, P2 too)
            assert ctx.get(dut.hold)
            await ctx.tick()
            assert not ctx.get(dut.pending.op.valid)
        assert not ctx.get(dut.hold)
        assert not ctx.get(dut.error)

    run_testbench(dut, tb)


def test_rejects_bad_state_params() -> None:
    with pytest.raises(ValueError, match=r"jobs must be 1\.\.16, got 0"):
        DecisionState(slots=16, jobs=0)
    with pytest.raises(ValueError, match=r"slots must be a power of two"):
        DecisionState(slots=12, jobs=2)
    with pytest.raises(ValueError, match=r"^DecisionState: scan_stages must be 1, 3 or 5, got 2$"):
        DecisionState(slots=16, jobs=2, scan_stages=2)


# ---- the engine's ports and the modify's signature checks ---------------------------------------

def test_connect_owner_checks_the_engine() -> None:
    """``connect_owner``: one row per slot, the state's layouts, a side for more than one job."""
    state = DecisionState(slots=16, jobs=2)

    def engine(slots: int, side: int | None = 1, late_slots: int = 16):
        return DramRmwEngine(64, slots=slots, row_bits=0, outstanding=8, row_width=256, side_shape=side,
                             modify=lambda w: ScaffoldRecordModify(w, side_width=side, late_slots=late_slots),
                             late_shape=late_layout(late_slots), effect_shape=effect_layout(late_slots))

    with pytest.raises(ValueError, match=r"connect_owner: the engine's rows must be the state's slots \(16\), got 8"):
        connect_owner(Module(), engine(8), state)
    with pytest.raises(ValueError, match=r"connect_owner: the engine's late_shape must be StructLayout"):
        connect_owner(Module(), engine(16, late_slots=32), state)
    with pytest.raises(ValueError, match=r"connect_owner: 2 jobs need the engine's side_shape"):
        connect_owner(Module(), engine(16, side=None), state)
    connect_owner(Module(), engine(16), state, job_of=lambda side: side[:1])


def test_engine_with_state_hides_the_late_ports() -> None:
    """``scaffold_engine(jobs=)``: the engine's ports but ``LATE_PORTS`` (wired inside), plus
    ``state_error``; without jobs the bare engine."""
    args = {"slots": 8, "row_bits": 0, "outstanding": 8, "row_width": 256, "side_width": 2}
    owned = scaffold_engine(64, jobs=2, **args)
    bare = scaffold_engine(64, **args)
    assert isinstance(owned, EngineWithState) and isinstance(bare, DramRmwEngine)
    assert set(owned.signature.members) == set(bare.signature.members) | {"state_error", "released", "released_valid"}
    assert set(LATE_PORTS) <= set(owned.engine.signature.members)


def test_harness_rejects_bad_jobs() -> None:
    args = {"slots": 8, "row_bits": 0, "outstanding": 8, "row_width": 256}
    with pytest.raises(ValueError, match=r"jobs must be a power of two with side_width > log2\(jobs\), got jobs 3"):
        ScaffoldEngineHarness(64, side_width=4, jobs=3, **args)
    with pytest.raises(ValueError, match=r"got jobs 4, side_width 1"):
        ScaffoldEngineHarness(64, side_width=1, jobs=4, **args)
    with pytest.raises(ValueError, match=r"got jobs 2, side_width 1"):  # no bit left for the release flag
        ScaffoldEngineHarness(64, side_width=1, jobs=2, **args)


# ---- the scaffold modify's late operand against its twin ------------------------------------------

@pytest.mark.parametrize(("width", "side_width"), [(64, 8), (256, None)])
def test_scaffold_late_is_its_python_twin(width: int, side_width: int | None) -> None:
    """ADD folds the late operand into the count and gives the effect of ``scaffold_effect``;
    WRITE and READ give no effect."""
    slots = 16
    dut = ScaffoldRecordModify(width, side_width=side_width, late_slots=slots)
    lay = late_layout(slots)
    rng = random.Random(width)

    async def bench(ctx):
        for _ in range(200):
            a, b = rng.getrandbits(width), rng.getrandbits(width)
            side = rng.getrandbits(side_width) if side_width else 0
            chunk, hslot, pend = rng.getrandbits(CHUNK_BITS), rng.randrange(slots), rng.getrandbits(1)
            run = rng.randrange(slots)
            late = pack(lay, {"head": {"chunk": chunk, "slot": hslot}, "pending": pend, "run": run})
            if side_width:
                ctx.set(dut.side, side)
            ctx.set(dut.late.as_value(), late)
            ctx.set(dut.op, Op.ADD)
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            assert (ctx.get(dut.sum), ctx.get(dut.overflow)) == scaffold_update(a, b, width // 32, side, late)
            fx = ctx.get(dut.effect)
            release = side_width is not None and side >> (side_width - 1) & 1
            head, pending = scaffold_effect(b, (chunk, hslot), pend, slots)
            if release:  # the head's chunk completes: the run behind it released
                head, pending = ((chunk + 1 + run) % (1 << CHUNK_BITS), (hslot + 1 + run) % slots), None
            assert fx.release == release and (not release or fx.run == run)
            assert fx.head_we == (head is not None) and fx.pending_we == (pending is not None)
            if head is not None:
                assert (fx.head.chunk, fx.head.slot) == head
            if pending is not None:
                assert fx.pending == pending
            for op in (Op.WRITE, Op.READ):
                ctx.set(dut.op, op)
                assert not ctx.get(dut.effect.head_we) and not ctx.get(dut.effect.pending_we)
                assert not ctx.get(dut.effect.release)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


def test_record_model_applies_effects_in_order() -> None:
    """The twin's state: an ADD's late operand is the state before it, its effect is applied
    after (two ADDs to one job and row: the second sees the first's head and pending bit)."""
    model = RecordModel(64, lambda row: 0, jobs=2, slots=8)
    model.apply(Op.ADD, 3, 1, 0, side=1)  # advance job 1's head, toggle row 3's pending bit
    assert model.heads == [(0, 0), (1, 1)] and model.pending[3] == 1
    model.apply(Op.ADD, 3, 1, 0, side=3)  # job 1 again: chunk + 1 + pending
    assert model.heads[1] == (3, 2) and model.pending[3] == 0
    model.apply(Op.WRITE, 3, 1, 0, side=1)
    assert model.heads[1] == (3, 2)


def test_record_model_releases_the_run_at_the_head() -> None:
    """The twin's release (the side's ``release_bit``): the pending run behind the job's head is
    cleared, the head advances by 1 + run, the run is recorded; the late operand carries the run."""
    model = RecordModel(64, lambda row: 0, jobs=2, slots=8, release_bit=2)
    for row in (1, 2, 4):
        model.apply(Op.ADD, row, 0, 0, side=1)  # toggle: pending
    before = model.late(0, 5, release_run(model.pending, 0))
    model.apply(Op.ADD, 5, 0, 0, side=4)  # job 0's head chunk completes: run 1, 2
    assert release_run([0, 1, 1, 0, 1, 0, 0, 0], 0) == 2 and before >> (CHUNK_BITS + 3 + 1) == 2
    assert model.heads == [(3, 3), (0, 0)] and model.pending == [0, 0, 0, 0, 1, 0, 0, 0]
    assert model.released == [(0, 3, 3, 0, 2)]


# ---- the scaffold engine with a DecisionState on AxiRam ---------------------------------------------

# Few rows (8: back-to-back commands to one row are frequent) and few jobs (the job is the side's
# low bits): 256-bit records on the 64-bit port, a 16-entry table at 20..200 cycles, and a
# 4-entry table at 1..12 (full most of the time, completions back to back).
CONFIGS = {
    "w64_r256_n16_j2": {"data_width": 64, "row_width": 256, "slots": 8, "row_bits": 0, "outstanding": 16,
                        "burst_beats": 16, "burst_hold": 64, "base_address": 0x1000, "delay_depth": 256,
                        "side_width": 8, "jobs": 2},
    "w64_r256_n4_j4": {"data_width": 64, "row_width": 256, "slots": 4, "row_bits": 1, "outstanding": 4,
                       "burst_beats": 8, "base_address": 0x1000, "delay_depth": 64, "side_width": 3, "jobs": 4},
}


@pytest.mark.cocotb
@pytest.mark.parametrize(("config", "seed", "latency"), [("w64_r256_n16_j2", 51, [20, 200]),
                                                         ("w64_r256_n4_j4", 52, [1, 12])])
def test_cocotb_engine_with_decision_state(config: str, seed: int, latency: list[int]) -> None:
    """Random WRITE / ADD / READ to few rows and jobs, random handshakes, random AXI pauses on
    every channel, random latency: every response as the twin (each ADD's count folds the head
    and pending bit it saw at C2), then one ADD per job and row shows every head and pending bit
    as the twin's; ``state_error`` and ``mem_error`` 0; memory as the twin's."""
    params = CONFIGS[config]
    top = f"scaffold_state_{config}"
    path = generate_verilog(ScaffoldEngineHarness, name=top, params=params)
    run_cocotb(verilog=path, toplevel=top, test_module="wanreduce.sim.tb_slot_store", testcase="random_commands",
               params={**params, "seed": seed, "commands": 800, "latency_range": latency,
                       "model": "record", "axi_id": 1})


LONG_RUNS = {"data_width": 64, "row_width": 256, "slots": 256, "row_bits": 0, "outstanding": 16,
             "burst_beats": 16, "burst_hold": 64, "base_address": 0x1000, "delay_depth": 256, "side_width": 8}


@pytest.mark.cocotb
@pytest.mark.parametrize(("jobs", "seed", "lengths", "release_depth"), [
    (2, 61, [0, 1, 63, 64, 65, 200, 255, 130], None),
    (4, 62, [65, 200, 1, 0, 64], 4)])
def test_cocotb_long_runs(jobs: int, seed: int, lengths: list[int], release_depth: int | None) -> None:
    """Runs of 0 .. S - 1 slots (S = 256, wrapping at S) released at every job's head on
    ``AxiRam`` (latency 20-200, pauses on every channel, random handshakes), other jobs' commands
    mixed in: every response, released part (two for a run over 64) and the final state as the
    twin's (sim/tb_slot_store.py, ``long_runs``); with a 4-entry release queue its consumer,
    ready 30 % of cycles, takes every part once, in order."""
    params = {**LONG_RUNS, "jobs": jobs, **({"release_depth": release_depth} if release_depth else {})}
    top = f"scaffold_long_j{jobs}"
    path = generate_verilog(ScaffoldEngineHarness, name=top, params=params)
    run_cocotb(verilog=path, toplevel=top, test_module="wanreduce.sim.tb_slot_store", testcase="long_runs",
               params={**params, "seed": seed, "run_lengths": lengths, "latency_range": [20, 200],
                       "model": "record", "axi_id": 1})


@pytest.mark.cocotb
@pytest.mark.parametrize(("jobs", "seed", "lengths", "job_regions", "release_depth"), [
    (2, 63, [0, 1, 63, 64, 65, 100, 127, 3], [(64, 7), (192, 7)], None),
    (4, 64, [65, 1, 0, 63, 30, 2], [(32, 6), (96, 6), (160, 6), (224, 6)], 4)])
def test_cocotb_long_runs_regions(jobs: int, seed: int, lengths: list[int], job_regions: list, release_depth: int | None) -> None:
    """``long_runs`` with ``DecisionState(regions=True)``: per-job regions of 128 or 64 of the 256
    slots (the last wrapping at S), every job's window reset to a random chunk first and one
    job's after every length (some of its bits pending), runs up to the window - 1 released at
    the heads on ``AxiRam`` (latency 20-200, pauses on every channel, random handshakes): every
    response, released part (two where the first scan step saw only part of the run) and the
    final heads and pending bits as the twin's (``RecordModel(regions=...)``)."""
    params = {**LONG_RUNS, "jobs": jobs, "regions": True, **({"release_depth": release_depth} if release_depth else {})}
    top = f"scaffold_long_regions_j{jobs}"
    path = generate_verilog(ScaffoldEngineHarness, name=top, params=params)
    run_cocotb(verilog=path, toplevel=top, test_module="wanreduce.sim.tb_slot_store", testcase="long_runs",
               params={**params, "seed": seed, "run_lengths": lengths, "latency_range": [20, 200],
                       "model": "record", "axi_id": 1, "job_regions": job_regions})


# ---- the release run at the head -------------------------------------------------------------------

def _release_model(slots: int, jobs: int, commands: list, regions: list | None = None,
                   owns: list | None = None) -> tuple[list, list]:
    """The state in command order (``RecordModel``'s release, generic effects): each command's
    late operand (head chunk, head slot, pending, run) and the released runs (job, head chunk,
    head slot, start, run); ``owns``: appended 1 for a release's first part (the completer's own
    chunk first), 0 for a long run's second part. A command is (job, slot, kind): "set" / "clear" its slot's pending
    bit, "release" at its job's head, "head" (the head moved by one, as a non-release advance),
    "reset" (a window reset: ``slot`` is the new head chunk; not an engine command). ``regions``:
    (base, log2 window) per job (default: the whole ring)."""
    heads, pending = [(0, 0)] * jobs, [0] * slots
    seen, released = [], []
    for job, slot, kind in commands:
        region = (regions[job][0], 1 << regions[job][1]) if regions else None
        chunk, start = heads[job]
        if kind == "reset":
            for k in range(region[1]):
                pending[region_slot(region[0], k, slots, region)] = 0
            heads[job] = (slot, region_slot(region[0], slot, slots, region))
            continue
        run = release_run(pending, start, region) if kind == "release" else 0
        first, parts = release_parts(heads[job], run, slots, region)
        seen.append((chunk, start, pending[slot], first))
        if kind in ("set", "clear"):
            pending[slot] = int(kind == "set")
        elif kind == "head":
            heads[job] = ((chunk + 1) % (1 << CHUNK_BITS), region_slot(start, 1, slots, region))
        elif kind == "release":
            for k in range(run):
                pending[region_slot(start, 1 + k, slots, region)] = 0
            heads[job] = parts[-1][:2]
            released += [(job, *part) for part in parts]
            if owns is not None:
                owns += [int(k == 0) for k in range(len(parts))]
    return seen, released


def _simulate_release(slots: int, jobs: int, commands: list, stalls: list[bool], release_depth: int | None = None,
                      p_ready: float = 1.0, popped: list | None = None,
                      counts: dict | None = None, regions: list | None = None,
                      scan_stages: int = 5) -> tuple[list, list, bool, int]:
    """The engine's stages around a ``DecisionState`` (C0 in order, held by ``hold`` or stalled
    by ``stalls[cycle]``; C1 the look-ahead, C2 the effect, from ``late`` as the model's effect
    rule says). Returns each command's late operand, the released runs, ``error`` and the
    cycles held. ``release_depth``: with a release queue, its consumer ready with probability
    ``p_ready``, the entries it takes appended to ``popped`` (job, start, run) until all are, its
    counters into ``counts``. ``regions``: (base, log2 window) per job on the ``region`` inputs,
    and the "reset" items go to the ``reset`` stream, the next command waiting in C0 meanwhile
    (it must be held). ``scan_stages``: ``DecisionState``'s (its ``PendingWords``')."""
    dut = DecisionState(slots=slots, jobs=jobs, release_depth=release_depth, regions=regions is not None,
                        scan_stages=scan_stages)
    rng = random.Random(len(commands))
    lay = effect_layout(slots)
    seen, released, error, held, resets = [], [], [], [0], [0]

    def effect(job: int, kind: str, late) -> dict:
        chunk, hslot, run = late.head.chunk, late.head.slot, late.run
        region = (regions[job][0], 1 << regions[job][1]) if regions else None
        if kind in ("set", "clear"):
            return {"pending_we": 1, "pending": int(kind == "set")}
        if kind == "head":
            return {"head_we": 1, "head": {"chunk": chunk + 1, "slot": region_slot(hslot, 1, slots, region)}}
        return {"head_we": 1, "head": {"chunk": chunk + 1 + run, "slot": region_slot(hslot, 1 + run, slots, region)},
                "release": 1, "run": run}

    async def tb(ctx):
        nxt, c1, c2, cycle, drain = 0, None, None, 0, 0
        while drain < 48:  # until the last effect is written (a long run's rest: up to 30 cycles more at S 512)
            drain = 0 if nxt < len(commands) or c1 is not None or c2 is not None else drain + 1
            resets[0] += drain == 0 and nxt < len(commands) and commands[nxt][2] == "reset"
            c0 = commands[nxt] if nxt < len(commands) else None
            reset = None
            if c0 is not None and c0[2] == "reset":
                reset = c0
                c0 = commands[nxt + 1] if nxt + 1 < len(commands) and commands[nxt + 1][2] != "reset" else None
            if regions is not None:
                for j, (base, lw) in enumerate(regions):
                    ctx.set(dut.region[j].base, base)
                    ctx.set(dut.region[j].log2_window, lw)
                ctx.set(dut.reset.valid, reset is not None)
                if reset is not None:
                    ctx.set(dut.reset.payload.job, reset[0])
                    ctx.set(dut.reset.payload.head, reset[1])
            ctx.set(dut.c0_valid, c0 is not None)
            if c0 is not None:
                ctx.set(dut.c0_job, c0[0])
                ctx.set(dut.c0_slot, c0[1])
                ctx.set(dut.c0_release, c0[2] == "release")
            ctx.set(dut.ahead_valid, c1 is not None)
            if c1 is not None:
                ctx.set(dut.ahead_job, c1[0])
                ctx.set(dut.ahead_slot, c1[1])
                ctx.set(dut.ahead_release, c1[2] == "release")
            ctx.set(dut.effect_valid, c2 is not None)
            if c2 is not None:
                late = ctx.get(dut.late)
                seen.append((late.head.chunk, late.head.slot, late.pending, late.run))
                ctx.set(dut.effect.as_value(), pack(lay, effect(c2[0], c2[2], late)))
            if ctx.get(dut.released_valid):
                r = ctx.get(dut.released)
                released.append((r.job, r.head.chunk, r.head.slot, r.start, r.run))
            if release_depth is not None:
                ready = rng.random() < p_ready
                ctx.set(dut.release.ready, ready)
                if ready and ctx.get(dut.release.valid):
                    item = ctx.get(dut.release.payload)
                    popped.append((item.job, item.start, item.run, item.own))
                drain -= drain > 0 and len(popped) < len(released)  # until the consumer took all
            hold = ctx.get(dut.hold)
            held[0] += bool(c0 is not None and hold)
            fire = c0 is not None and not hold and not stalls[cycle % len(stalls)]
            c2, c1 = c1, (c0 if fire else None)
            assert not (fire and reset is not None), f"cycle {cycle}: a command left C0 during a window reset"
            taken = reset is not None and ctx.get(dut.reset.ready)
            nxt += fire + bool(taken)
            cycle += 1
            await ctx.tick()
        error.append(ctx.get(dut.error))
        if release_depth is not None:
            counts.update(pushed=ctx.get(dut.queue.pushed), waits=ctx.get(dut.queue.waits))

    run_testbench(dut, tb)
    return seen, released, bool(error[0]), held[0]


S128 = 128  # two 64-bit words: a run crosses a word, wraps at S


def _check_release(commands: list, stalls: list[bool], jobs: int = 1, slots: int = S128,
                   regions: list | None = None, scan_stages: int = 5) -> tuple[list, int]:
    want_seen, want_released = _release_model(slots, jobs, commands, regions)
    seen, released, error, held = _simulate_release(slots, jobs, commands, stalls, regions=regions,
                                                    scan_stages=scan_stages)
    for k, (got, want) in enumerate(zip(seen, want_seen, strict=True)):
        assert got == want, f"command {k} {commands[k]}: late (chunk, slot, pending, run) {got}, want {want}"
    assert released == want_released
    assert not error
    return released, held


def test_release_runs_of_every_length() -> None:
    """Back to back (no stall): runs of 0, 1 and several slots, one crossing the 64-bit word
    (slots 4..70: longer than ``RUN_STEP``, so in two parts), one wrapping at S (126, 127, 0, 1); each head advances by 1 + run, the run's
    bits are cleared (the next release from there finds them clear; the two commands right after
    one see their bits cleared, through the bypass), and C0 holds each release
    until the commands ahead have left C1 and C2."""
    sets = [(0, s, "set") for s in [2] + list(range(4, 71))]
    to_125 = [(0, 0, "head")] * (125 - 72)
    wrap = [(0, s, "set") for s in (126, 127, 0, 1)]
    commands = [(0, 0, "release"), *sets[:1], (0, 0, "release"), *sets[1:], (0, 0, "release"),
                (0, 40, "clear"), (0, 41, "clear"),  # right after: their bits released one / two back
                (0, 0, "release"), *to_125, *wrap, (0, 0, "release"), (0, 5, "set"), (0, 0, "release")]
    released, held = _check_release(commands, [False])
    assert [r[-1] for r in released] == [0, 1, 64, 2, 0, 4, 0]  # 67: 64 at once, then 1 + 2
    assert released[2][3:] == (3, 64) and released[3][3:] == (68, 2)  # crossing the word
    assert released[5][2:] == (2, 125, 4)  # wrapping at S
    assert held >= 2 * 4  # each release after a command: two cycles


@pytest.mark.parametrize("scan_stages", [1, 3, 5])
@pytest.mark.parametrize(("jobs", "seed"), [(1, 5), (2, 6), (4, 7)])
def test_release_random_against_model(jobs: int, seed: int, scan_stages: int) -> None:
    """Random set / clear / head / release commands on a 128-slot ring and every job, the set and
    clear slots a few behind a job's head (so runs form; the heads start near the wrap and go on
    round the ring), random C0 stalls: every late operand (the head and pending bits
    bypassed from releases just before, the run peeked) and every released run as the model's,
    with the scan in one stage and in three (where the commands behind a release must wait
    through its R and S1, and the candidate for its PEEK's S2)."""
    rng = random.Random(seed)
    commands: list = [(j, 0, "head") for j in range(jobs) for _ in range(100)]  # heads near the wrap
    for _ in range(500):
        job = rng.randrange(jobs)
        # the job's head now: the model's late operand of a probe command
        head = _release_model(S128, jobs, [*commands, (job, 0, "clear")])[0][-1][1]
        kind = rng.choice(["set", "set", "set", "clear", "head", "release"])
        commands.append((job, (head + rng.randint(1, 6)) % S128, kind))
    released, _ = _check_release(commands, [rng.random() < 0.3 for _ in range(97)], jobs, scan_stages=scan_stages)
    runs = [r[-1] for r in released]
    assert {0, 1} <= set(runs) and max(runs) >= 3


@pytest.mark.parametrize(("scan_stages", "per_release"), [(1, 5), (3, 10), (5, 14)])
def test_release_cost_in_a_back_to_back_stream(scan_stages: int, per_release: int) -> None:
    """Back-to-back commands with effects, every other one a release at the head whose run is
    the slot the command before it set (run 1): each release holds C0 ``per_release`` cycles
    (docs/large_slots.md's table: 5 with the scan in one stage; 10 with three: the PEEK's answer
    two cycles later, the commands behind the RELEASE three cycles more, as their pending-bit
    reads come from C0), the first one fewer (no
    effect ahead of it to wait for), and every late operand and run as the model's."""
    n = 12
    commands = [c for k in range(n) for c in ((0, (2 * k + 1) % S128, "set"), (0, 0, "release"))]
    released, held = _check_release(commands, [False], scan_stages=scan_stages)
    assert [r[-1] for r in released] == [1] * n
    _, _, _, held_one = _simulate_release(S128, 1, commands[:2], [False], scan_stages=scan_stages)
    assert held - held_one == (n - 1) * per_release


@pytest.mark.parametrize("scan_stages", [1, 3, 5])
def test_commands_right_after_a_release_see_its_run_cleared(scan_stages: int) -> None:
    """Short runs released at the head, each followed at once by commands on the run's slots (a
    slot reused as soon as it is freed): each sees its bit cleared, from the RELEASE's write-back
    (three stages: the commands behind it wait until their reads, as they leave C0, come at its S2
    or later), as the model says; then they set them again and the next release takes them."""
    commands: list = []
    head = 0
    for run in (1, 2, 3, 1):
        behind = [(head + 1 + k) % S128 for k in range(run)]
        commands += [(0, s, "set") for s in behind] + [(0, 0, "release")] + [(0, s, "set") for s in behind]
        head = (head + 1 + run) % S128
    commands.append((0, 0, "release"))
    released, _ = _check_release(commands, [False], scan_stages=scan_stages)
    assert [r[-1] for r in released] == [1, 2, 3, 1, 0]


def _runs_of(lengths: list[int], jobs: int, slots: int) -> list:
    """For each length, each job in turn sets the ``length`` slots behind its head (the heads
    move together: every job releases the same lengths), another job clears the slot that ends
    the run between those sets (mixed commands, the bypass of a clear), then the job releases."""
    commands, head = [], 0
    for length in lengths:
        for job in range(jobs):
            stop = (head + 1 + length) % slots
            for k in range(length):
                commands.append((job, (head + 1 + k) % slots, "set"))
                if jobs > 1 and k % 17 == 0 and length < slots - 1:
                    commands.append(((job + 1) % jobs, stop, "clear"))
            commands.append((job, 0, "release"))
        head = (head + 1 + length) % slots
    return commands


@pytest.mark.parametrize(("slots", "jobs", "lengths"), [
    (256, 1, [0, 1, 63, 64, 65, 200, 255, 2, 130]),  # the whole ring (S - 1); wrapping at S
    (256, 2, [65, 0, 200, 64, 1, 255, 63]),
    (128, 3, [127, 66, 1, 100]),
    (512, 4, [200, 64, 65, 300, 511]),
])
def test_long_runs_are_released_whole(slots: int, jobs: int, lengths: list[int]) -> None:
    """Runs of 0, 1, 63, 64, 65, 200 slots and the whole ring but the head (S - 1), wrapping at
    S, for 1-4 jobs mixed with other jobs' commands and random C0 stalls: a run up to
    ``RUN_STEP`` (64) is released in one part, a longer one in two (the first 64 slots at once,
    the rest when the background RELEASE ends), every late operand, head and part as the model's,
    the bits cleared (the next release finds exactly the next run), ``error`` 0."""
    commands = _runs_of(lengths, jobs, slots)
    stalls = [i % 5 == 3 for i in range(23)]
    released, _ = _check_release(commands, stalls, jobs, slots)
    for job in range(jobs):  # each chunk once, in order: every part starts at the last one's head
        parts = [r for r in released if r[0] == job]
        assert len(parts) == len(lengths) + sum(n > 64 for n in lengths)
        assert sum(1 + r[-1] for r in parts) == sum(1 + n for n in lengths)
        head = 0
        for _, chunk, slot, start, run in parts:
            assert start == head % slots and (chunk, slot) == (head + 1 + run, (head + 1 + run) % slots)
            head += 1 + run


def test_long_run_holds_every_command_until_released() -> None:
    """While a long run's rest is released every command waits in C0 (``hold``): the command of
    another job right behind it enters C2 only after the job's final head is written, and sees
    the run's last slot cleared."""
    slots = 256
    commands = [(0, s, "set") for s in range(1, 201)] + [(0, 0, "release"), (1, 200, "set"), (0, 0, "clear")]
    _, held = _check_release(commands, [False], 2, slots)
    assert held >= 2 + 1 + 200 // 128  # the candidate in C1 / C2, then the scan's steps


# ---- the release queue fed from ``released`` ------------------------------------------------------

@pytest.mark.parametrize(("jobs", "depth", "p_ready", "seed"), [(1, 3, 0.2, 8), (2, 4, 0.5, 9), (4, 16, 0.3, 10),
                                                                (3, 8, 1.0, 11)])
def test_release_queue_with_a_random_consumer(jobs: int, depth: int, p_ready: float, seed: int) -> None:
    """Random set / release commands (runs of 0 to ~150 slots, so some come in two parts) for
    every job into a ``RecordReleaseQueue`` read by a consumer ready at random: every released
    chunk comes out exactly once, in order per job (each job's entries cover its slots from 0
    on without gap or overlap), the entries are the ``released`` ones in order, the queue counts
    them, candidates waited while it was full (a slow consumer), ``error`` 0."""
    rng = random.Random(seed)
    slots = 256
    commands, heads = [], [0] * jobs
    for _ in range(6):
        for job in range(jobs):
            length = rng.choice([0, 1, 2, 63, 64, 65, 150])
            commands += [(job, (heads[job] + 1 + k) % slots, "set") for k in range(length)]
            commands.append((job, 0, "release"))
            heads[job] = (heads[job] + 1 + length) % slots
    owns: list = []
    want_seen, want_released = _release_model(slots, jobs, commands, owns=owns)
    popped: list = []
    counts: dict = {}
    seen, released, error, held = _simulate_release(slots, jobs, commands, [False], depth, p_ready, popped, counts)
    assert counts["pushed"] == len(released)
    assert seen == want_seen and released == want_released and not error
    # ``own``: a release's first part (its first chunk the completer's), not a long run's second
    assert popped == [(j, start, run, own) for (j, _, _, start, run), own in zip(released, owns, strict=True)]
    assert 0 in owns and 1 in owns
    for job in range(jobs):
        chunks = [(start + k) % slots for j, start, run, _ in popped if j == job for k in range(1 + run)]
        assert chunks == [k % slots for k in range(len(chunks))]  # each once, in order
        assert len(chunks) == sum(1 + run for j, *_, run in want_released if j == job)
    if p_ready < 0.3:
        assert counts["waits"] > 0 and held > len(commands) // 10  # the full queue held release candidates


def test_release_queue_rejects_bad_depth() -> None:
    with pytest.raises(ValueError, match=r"release queue depth must be 3\.\.4096, got 2"):
        DecisionState(slots=16, jobs=2, release_depth=2)


# ---- per-job regions and the window reset ---------------------------------------------------------

# (base, log2 window) per job: a region wrapping at S (240..255, 0..111), regions not aligned to a
# word (170 + 16, 200 + 8), sharing words with others
REGIONS = {1: [(240, 7)], 2: [(240, 7), (112, 7)], 3: [(240, 7), (112, 5), (170, 4)],
           4: [(240, 7), (112, 5), (170, 4), (200, 3)]}


def _region_commands(jobs: int, n: int, seed: int) -> list:
    """A window reset per job first (the heads start there), then random commands of every job
    in its region: sets of the next slots behind the head (now and then the whole run up to 127
    slots: long runs, wrapping in the region and at S), clears, head advances, releases, and
    window resets of a job (random new head) while other jobs' slots are pending."""
    rng = random.Random(seed)
    regions = REGIONS[jobs]
    commands: list = [(j, rng.getrandbits(CHUNK_BITS), "reset") for j in range(jobs)]
    for _ in range(n):
        job = rng.randrange(jobs)
        base, lw = regions[job]
        region = (base, 1 << lw)
        head = _release_model(S256, jobs, [*commands, (job, 0, "clear")], regions)[0][-1][1]
        kind = rng.choice(["set", "set", "set", "clear", "head", "release", "release", "fill", "reset"])
        if kind == "fill":  # a run of up to the whole region behind the head
            length = rng.choice([1, 63, 64, 65, 100, (1 << lw) - 1, rng.randrange(1 << lw)]) % (1 << lw)
            commands += [(job, region_slot(head, 1 + k, S256, region), "set") for k in range(length)]
            commands.append((job, 0, "release"))
        elif kind == "reset":
            commands.append((job, rng.getrandbits(CHUNK_BITS), "reset"))
        else:
            commands.append((job, region_slot(head, rng.randint(1, 6), S256, region), kind))
    return commands


S256 = 256


@pytest.mark.parametrize(("jobs", "seed"), [(1, 21), (2, 22), (3, 23), (4, 24)])
def test_regions_and_window_reset_against_model(jobs: int, seed: int) -> None:
    """Per-job regions (one wrapping at S, unaligned ones sharing words) and window resets among
    random set / clear / head / release commands and long runs (up to the whole region), random
    C0 stalls: every late operand and released part as the model's (heads wrap in the region, the
    scan stops at its end, a reset CLEARs only its region's pending bits and sets the head to
    the new chunk's slot), no command leaves C0 while a reset is pending, ``error`` 0."""
    commands = _region_commands(jobs, 60, seed)
    assert sum(c[2] == "reset" for c in commands) > jobs
    released, _ = _check_release(commands, [i % 7 == 2 for i in range(29)], jobs, S256, REGIONS[jobs])
    assert max(r[-1] for r in released) >= 2


def test_window_reset_clears_its_region_only() -> None:
    """Two jobs with pending slots in one shared 64-bit word: a reset of job 1 clears its bits
    (its next release finds no run) and keeps job 0's (its release finds its run); the head is
    the new chunk's slot in the region."""
    regions = [(0, 5), (32, 5)]  # slots 0..31 and 32..63: one word
    commands = [(0, 5, "reset"), (1, 40, "reset")]
    commands += [(0, 5 + k, "set") for k in range(1, 9)] + [(1, 32 + (40 + k) % 32, "set") for k in range(1, 9)]
    commands += [(1, 7, "reset"), (0, 0, "release"), (1, 0, "release")]
    released, _ = _check_release(commands, [False], 2, 64, regions)
    assert released == [(0, 14, 14, 5, 8), (1, 8, 32 + 8, 32 + 7, 0)]


def test_run_wrapping_in_a_small_region_is_released_in_two_parts() -> None:
    """A region of 32 slots (112..143) across two words, the head at 140, every other slot
    pending: the first scan step sees 141..143 and 112..127 (19 slots; 128..139 in the start's
    word are below the start), so the candidate releases 19 at once and the background scan the
    other 11 (128..138); the head goes round the region to 140 again, 32 chunks on."""
    commands = [(0, 28, "reset")] + [(0, s, "set") for s in range(112, 144) if s != 140] + [(0, 0, "release")]
    released, _ = _check_release(commands, [False], 1, S256, [(112, 5)])
    assert released == [(0, 28 + 1 + 19, 128, 140, 19), (0, 28 + 32, 140, 128, 11)]


def test_resends_and_completions_queue_their_slots() -> None:
    """Effects ``resend`` and ``complete`` (on-completion release) on random jobs and slots, back to
    back or with gaps, others with neither: each queues its command's slot as a one-chunk run
    (job, start = slot, run 0, ``resent`` for a resend only, ``own`` for a completion only), in
    order; no head or pending bit changes, ``error`` 0."""
    slots, jobs = 16, 2
    rng = random.Random(16)
    dut = DecisionState(slots=slots, jobs=jobs, release_depth=8)
    lay = effect_layout(slots)
    commands = [(rng.randrange(jobs), rng.randrange(slots), rng.choice(["resend", "complete", None]),
                 rng.random() < 0.3) for _ in range(60)]
    want = [(j, s, 0, kind == "resend", kind == "complete") for j, s, kind, _ in commands if kind]
    popped: list = []

    async def tb(ctx):
        ctx.set(dut.release.ready, 1)
        schedule = []  # (look-ahead, C2) per cycle
        for k, (_, _, _, gap) in enumerate(commands):
            schedule += [None] * gap + [k]
        ahead = None
        for k in [*schedule, None, None, None, None]:
            ctx.set(dut.ahead_valid, k is not None)
            if k is not None:
                ctx.set(dut.ahead_job, commands[k][0])
                ctx.set(dut.ahead_slot, commands[k][1])
            ctx.set(dut.effect_valid, ahead is not None)
            if ahead is not None:
                kind = commands[ahead][2]
                ctx.set(dut.effect.as_value(), pack(lay, {"resend": kind == "resend", "complete": kind == "complete"}))
            if ctx.get(dut.release.valid):
                item = ctx.get(dut.release.payload)
                popped.append((item.job, item.start, item.run, bool(item.resent), bool(item.own)))
            ahead = k
            await ctx.tick()
        for _ in range(8):
            if ctx.get(dut.release.valid):
                item = ctx.get(dut.release.payload)
                popped.append((item.job, item.start, item.run, bool(item.resent), bool(item.own)))
            await ctx.tick()
        assert not ctx.get(dut.error) and not ctx.get(dut.released_valid)

    run_testbench(dut, tb)
    assert popped == want
    assert any(r for *_, r in want) and not all(r for *_, r in want)
