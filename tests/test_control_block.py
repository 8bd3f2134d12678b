"""The control block: register writes/reads through CONTROL messages, counters, window reset."""

from pathlib import Path

import pytest
from amaranth.back import rtlil
from amaranth.sim import Simulator
from stream_helpers import comb_cells_between, comb_cells_table, comb_cone

from wanreduce import regs, wire
from wanreduce.hdl.control_block import ControlBlock
from wanreduce.hdl.layouts import lanes, payload_beats
from wanreduce.model import Drop, Outcome


def ops_words(ops):
    words = []
    for write, addr, value in ops:
        words += [(wire.CONTROL_WRITE if write else 0) | addr, value & 0xFFFFFFFF]
    return words


def beats_of(words, w):
    ln = lanes(w)
    n = payload_beats(len(words), w)
    padded = words + [0] * (n * ln - len(words))
    return [sum(padded[b * ln + k] << (32 * k) for k in range(ln)) for b in range(n)]


async def transact(ctx, dut, ops, w, head_ack=None):
    """Send one CONTROL message, return the reply's value words."""
    words = ops_words(ops)
    beats = beats_of(words, w)
    replies = []
    ctx.set(dut.m_msg.ready, 1)
    for i, b in enumerate(beats):
        ctx.set(dut.s_msg.payload, {"data": b, "first": i == 0, "last": i == len(beats) - 1,
                                    "hdr": {"msg_type": wire.MsgType.CONTROL, "element_count": len(words)}})
        ctx.set(dut.s_msg.valid, 1)
        await ctx.tick().until(dut.s_msg.ready)
        ctx.set(dut.s_msg.valid, 0)
        for _ in range(200):
            if head_ack is not None and ctx.get(dut.reset.valid):
                head_ack.append((ctx.get(dut.reset.payload.job), ctx.get(dut.reset.payload.head)))
                ctx.set(dut.reset.ready, 1)
            else:
                ctx.set(dut.reset.ready, 0)
            if ctx.get(dut.m_msg.valid):
                replies.append(ctx.get(dut.m_msg.payload))
                assert ctx.get(dut.m_msg.payload.hdr.msg_type) == wire.MsgType.CONTROL_REPLY
                await ctx.tick()
                break
            await ctx.tick()
        else:
            raise AssertionError("no reply")
    ln = lanes(w)
    out = []
    for r in replies:
        out += [(r.data >> (32 * k)) & 0xFFFFFFFF for k in range(ln)]
    return out[1 : len(words) : 2]


@pytest.mark.parametrize("slot_memory", ["onchip", "dram"])
@pytest.mark.parametrize("w", [64, 256, 512])
def test_register_ops_and_counters(w, slot_memory):
    """Writes, reads and counters; ``dram``: the same with the read mux's per-group selects
    (``split_read``)."""
    dut = ControlBlock(w, ports=2, slots=16, elements=64, groups=4, jobs=2, slot_memory=slot_memory)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    resets = []

    async def tb(ctx):
        vals = await transact(ctx, dut, [(0, regs.ID, 0), (1, regs.group(1), 0b1011),
                                         (0, regs.group(1), 0), (1, regs.MAX_ELEMENTS, 1000),
                                         (1, regs.PORT_COUNTER_BASE, 55)], w)
        assert vals == [regs.CORE_ID, 0b1011, 0b1011, 64, 0]  # clamp to E; counters are read-only
        assert ctx.get(dut.group_bitmap[1]) == 0b1011 and ctx.get(dut.max_elements) == 64
        cfg = regs.pack_job_cfg(enabled=True, log2_window=3, base=8)
        await transact(ctx, dut, [(1, regs.job_cfg(1), cfg), (1, regs.CTRL, 1),
                                  (1, regs.LOCAL_MAC_HI, 0xAABB), (1, regs.LOCAL_MAC_LO, 0xCCDDEEFF)], w)
        assert ctx.get(dut.job_cfg[1].enable) == 1 and ctx.get(dut.job_cfg[1].base) == 8
        assert ctx.get(dut.job_cfg[1].log2_window) == 3
        assert ctx.get(dut.release_on_completion) == 1 and ctx.get(dut.local_mac) == 0xAABBCCDDEEFF
        # events: port 2 (host) frame + drop, outcomes, results
        for _ in range(3):
            ctx.set(dut.port_frame_in, 0b100)
            ctx.set(dut.port_drop, 0b100)
            ctx.set(dut.port_drop_reason[2], int(Drop.LENGTH))
            ctx.set(dut.outcome, 1)
            ctx.set(dut.outcome_code, int(Outcome.DUPLICATE))
            ctx.set(dut.result_out, 1)
            await ctx.tick()
        for s in (dut.port_frame_in, dut.port_drop, dut.outcome, dut.result_out):
            ctx.set(s, 0)
        ctx.set(dut.head[0], 77)
        vals = await transact(ctx, dut, [(0, regs.port_frames_in(2), 0), (0, regs.port_drops(2, Drop.LENGTH), 0),
                                         (0, regs.port_drops(1, Drop.LENGTH), 0),
                                         (0, regs.outcome_counter(Outcome.DUPLICATE), 0),
                                         (0, regs.RESULTS_OUT, 0), (0, regs.job_head(0), 0),
                                         (0, regs.CONTROL_IN, 0), (0, 0x7777, 0)], w)
        assert vals == [3, 3, 0, 3, 3, 77, 3, 0]
        await transact(ctx, dut, [(1, regs.job_head(1), 1234)], w, head_ack=resets)
        assert resets == [(1, 1234)]

    sim.add_testbench(tb)
    sim.run()


def test_reset_values_come_from_the_register_map():
    dut = ControlBlock(64, ports=1, slots=4, elements=32, groups=1, jobs=1)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def tb(ctx):
        assert ctx.get(dut.udp_port) == wire.DEFAULT_UDP_PORT
        assert ctx.get(dut.local_ip) == regs.DEFAULT_LOCAL_IP
        assert ctx.get(dut.max_elements) == 32

    sim.add_testbench(tb)
    sim.run()


@pytest.mark.parametrize("w", [64, 256])
def test_params_registers_are_the_map_constants(w):
    """PARAMS0/PARAMS1 read the constants of regs.register_map (W/32 is the bus width)."""
    dut = ControlBlock(w, ports=3, slots=32, elements=100, groups=5, jobs=2)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def tb(ctx):
        p0, p1 = await transact(ctx, dut, [(0, regs.PARAMS0, 0), (1, regs.PARAMS1, 7)], w)
        assert p0 == regs.params0(ports=3, width=w, slots=32, groups=5)
        assert (p0 & 0xFF, p0 >> 8 & 0xFF, p0 >> 16 & 0xFF, p0 >> 24) == (3, w // 32, 5, 5)
        assert p1 == 100 | 2 << 16 == regs.params1(elements=100, jobs=2)

    sim.add_testbench(tb)
    sim.run()


def test_registers_doc_table_is_generated_from_regs():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "registers.md").read_text()
    assert doc.startswith(regs.markdown()), "regenerate: python -m wanreduce.regs"


def test_converts_and_validates():
    rtlil.convert(ControlBlock(512, ports=8, slots=16, elements=256, groups=8, jobs=4))
    with pytest.raises(ValueError, match="ports"):
        ControlBlock(64, ports=0, slots=4, elements=8, groups=1, jobs=1)
    with pytest.raises(ValueError, match="data width"):
        ControlBlock(96, ports=1, slots=4, elements=8, groups=1, jobs=1)


@pytest.mark.parametrize(("w", "slot_memory"), [(64, "onchip"), (256, "onchip"), (64, "dram"), (256, "dram")])
def test_probe_registers_wait_for_the_reducer(w, slot_memory):
    """JOBj_PROBE is a plain RW register per job driving probe_job/probe_chunk when its
    PROBE_BITMAP is read; the read waits for probe_ok (a stand-in reducer answers 3 cycles after
    the key settles) and returns probe_bitmap (with ``dram`` through ``probe_ok_r``)."""
    dut = ControlBlock(w, ports=1, slots=16, elements=64, groups=2, jobs=3, slot_memory=slot_memory)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def reducer(ctx):
        key, age = None, 0
        while True:  # as the reducer: probe_ok is 0 in the cycle the key changes
            await ctx.tick()
            k = (ctx.get(dut.probe_job), ctx.get(dut.probe_chunk))
            age = age + 1 if k == key else 0
            key = k
            ctx.set(dut.probe_bitmap, (k[0] << 8 | k[1]) if age >= 3 else 0xDEAD)
            ctx.set(dut.probe_ok, age >= 3)

    async def tb(ctx):
        vals = await transact(ctx, dut, [(1, regs.job_probe(2), 5), (0, regs.job_probe_bitmap(2), 0),
                                         (1, regs.job_probe(0), 9), (0, regs.job_probe_bitmap(0), 0),
                                         (0, regs.job_probe(2), 0), (0, regs.job_probe_bitmap(2), 0),
                                         (1, regs.job_probe_bitmap(1), 3)], w)
        assert vals == [5, 2 << 8 | 5, 9, 9, 5, 2 << 8 | 5, 1 << 8]  # a PROBE_BITMAP write is ignored
        # probe_chunk follows a write to the probed job's JOBj_PROBE at once, not only from the
        # next PROBE_BITMAP read (guards a probe_chunk kept as a register of its own: branch
        # fmax12 tried one); a write to another job's JOBj_PROBE leaves it
        vals = await transact(ctx, dut, [(1, regs.job_probe(1), 4), (1, regs.job_probe(1), 6)], w)
        assert vals == [4, 6]
        assert (ctx.get(dut.probe_job), ctx.get(dut.probe_chunk)) == (1, 6)
        vals = await transact(ctx, dut, [(1, regs.job_probe(0), 11)], w)
        assert (ctx.get(dut.probe_job), ctx.get(dut.probe_chunk)) == (1, 6)

    sim.add_testbench(reducer, background=True)
    sim.add_testbench(tb)
    sim.run()


def probe_read_cycles(slot_memory: str, answer_every: int) -> tuple[list[int], int]:
    """Three PROBE_BITMAP reads (jobs 2, 0, 2) against a stand-in reducer that answers a key
    (probe_ok with the key's bitmap) for one cycle only, ``answer_every`` cycles after it settles
    and every ``answer_every`` cycles after that, with a wrong bitmap in every other cycle: the
    values read and the cycles the message's exchange took."""
    dut = ControlBlock(64, ports=1, slots=16, elements=64, groups=2, jobs=3, slot_memory=slot_memory)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    out = {}

    async def reducer(ctx):
        key, age = None, 0
        while True:
            await ctx.tick()
            k = (ctx.get(dut.probe_job), ctx.get(dut.probe_chunk))
            age = age + 1 if k == key else 0
            key = k
            ok = age > 0 and age % answer_every == 0
            ctx.set(dut.probe_bitmap, (k[0] << 8 | k[1]) if ok else 0xDEAD0000 | age)
            ctx.set(dut.probe_ok, ok)

    async def clock(ctx):
        async for _ in ctx.tick():
            out["now"] = out.get("now", 0) + 1

    async def tb(ctx):
        await transact(ctx, dut, [(1, regs.job_probe(2), 5), (1, regs.job_probe(0), 9)], 64)
        t0 = out.get("now", 0)
        out["vals"] = await transact(ctx, dut, [(0, regs.job_probe_bitmap(j), 0) for j in (2, 0, 2)], 64)
        out["cycles"] = out["now"] - t0

    sim.add_testbench(reducer, background=True)
    sim.add_testbench(clock, background=True)
    sim.add_testbench(tb)
    sim.run()
    return out["vals"], out["cycles"]


@pytest.mark.parametrize("answer_every", [1, 3, 5])
def test_registered_probe_reads_a_vouched_answer_a_cycle_later(answer_every):
    """With ``dram`` the FSM waits for ``probe_ok_r`` (probe_ok a cycle late) and READ reads
    ``probe_bm_r``, the last answer probe_ok vouched for: every read returns its key's bitmap
    although the stand-in answers for one cycle at a time and offers a wrong bitmap in between;
    each PROBE_BITMAP read takes exactly one cycle more than the on-chip block's (the answer's
    ``answer_every`` cycles after the key settles are the same: the cut costs probe latency only)."""
    want = [2 << 8 | 5, 9, 2 << 8 | 5]
    vals, cycles = probe_read_cycles("dram", answer_every)
    assert vals == want
    base_vals, base_cycles = probe_read_cycles("onchip", answer_every)
    if answer_every == 1:  # answered every cycle: the on-chip block's read is right too
        assert base_vals == want
    assert cycles == base_cycles + 3, (cycles, base_cycles)


def test_registered_probe_keeps_probe_ok_off_the_fsm():
    """The probe's answer (the reducer's 32-bit key compare ``probe_ok``) reaches the FSM's next
    state only through ``probe_ok_r`` with ``dram`` (the DRAM build's core clock: the control
    FSM's 9.1-9.6 ns path from ``probe_job`` through the compare, docs/benchmarks.md session 38);
    the on-chip block keeps the direct path (its RTL unchanged)."""
    def cells(slot_memory: str, reg: str):
        dut = ControlBlock(64, ports=1, slots=16, elements=64, groups=2, jobs=3, slot_memory=slot_memory)
        return comb_cells_between(dut, "probe_ok", reg)

    assert cells("onchip", "fsm_state")  # the before-case: probe_ok -> the next state
    assert not cells("dram", "fsm_state")
    assert sum(cells("dram", "probe_ok_r").values()) <= 2


def test_registered_probe_answer_loads_without_the_compare():
    """With ``dram`` ``probe_bm_r`` loads every cycle EXEC waits for a probe until ``probe_ok_r``
    rises, so the probe's key compare (``probe_ok``) is not in its load enable (the Versa DRAM
    build's 8.92 ns path from ``probe_job`` through the compare, docs/benchmarks.md session 39);
    test_registered_probe_reads_a_vouched_answer_a_cycle_later checks the answer it keeps."""
    dut = ControlBlock(64, ports=1, slots=16, elements=64, groups=2, jobs=3, slot_memory="dram")
    assert not comb_cells_between(dut, "probe_ok", "probe_bm_r")


@pytest.mark.parametrize("slot_memory", ["onchip", "dram"])
@pytest.mark.parametrize("w", [64, 512])
def test_every_address_reads_its_own_register(w, slot_memory):
    """The read-index decode (a timing-critical 70-way decode, restructured in timing work):
    every mapped address reads its own register (its reset value), and an address that
    differs from a mapped one only in its upper byte reads 0, as unmapped addresses do.
    ``dram``: the same through the per-group selects and group index (``split_read``)."""
    kw = dict(ports=2, slots=16, elements=64, groups=4, jobs=2)
    dut = ControlBlock(w, **kw, slot_memory=slot_memory)
    reg_map = regs.register_map(width=w, **kw)
    mapped = {r.addr: r.reset for r in reg_map}
    aliases = sorted({a ^ b for a in mapped for b in (0x100, 0x200, 0x800, 0x1000, 0x4000, 0x8000)} - set(mapped))
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def tb(ctx):
        ctx.set(dut.probe_ok, 1)  # a stand-in reducer: every JOBj_PROBE_BITMAP read answers 0
        addrs = list(mapped) + aliases
        got = []
        for i in range(0, len(addrs), 16):
            got += await transact(ctx, dut, [(0, a, 0) for a in addrs[i:i + 16]], w)
        want = {**mapped, **dict.fromkeys(aliases, 0)}
        want[regs.CONTROL_IN] = addrs.index(regs.CONTROL_IN) // 16 + 1  # counts this message too
        assert dict(zip(addrs, got, strict=True)) == want

    sim.add_testbench(tb)
    sim.run()


@pytest.mark.parametrize("slot_memory", ["onchip", "dram"])
def test_reply_read_mux_decodes_the_group_index_only(slot_memory):
    """READBACK picks the register's group of 8 by ``ridx[3:]``: one compare per group, not one
    of all of ``ridx``'s bits per register (71 at the default core: the reply's 8.02 ns path at
    seed 8, docs/benchmarks.md "Cut 6"). ``dram`` (``split_read``): no group index at all, the
    reply ORs the groups' registers (each 0 unless its hit flag was set; ``read_gidx`` ->
    ``core.s_msg__1__payload`` 8.29 ns at session 42's seed 2, docs/benchmarks.md session 43).
    Every register's value and the unmapped addresses' 0 are checked by
    test_every_address_reads_its_own_register above."""
    dut = ControlBlock(64, ports=2, slots=16, elements=256, groups=4, jobs=2, slot_memory=slot_memory)
    sources, cells = comb_cone(dut, "read_value")
    groups = {s for s in sources if s.startswith("read_group")}
    assert len(groups) >= 8
    if slot_memory == "dram":
        assert sources == groups and not cells["$eq"] and not cells["$pmux"], (sources, cells)
    else:
        assert "ridx" in sources and cells["$eq"] <= len(groups), cells


def test_split_read_selects_are_ors_of_the_registered_match_flags():
    """With ``dram`` (``split_read``) the address is compared with every readable register's
    as it is loaded (``read_match``, one flip-flop per register), so each group's select
    (``read_sel_r{g}``) and hit flag (``read_hit{g}``) load ORs of that group's match flags
    only: no address decode from ``addr_r`` / ``page_r`` in front of them (``addr_r`` ->
    ``read_gidx`` / ``read_sel_r5``, 8.12-8.85 ns at session 42's seeds 1-3, docs/benchmarks.md
    session 43). test_every_address_reads_its_own_register checks every address's value."""
    kw = dict(ports=2, slots=16, elements=256, groups=4, jobs=2)
    dut = ControlBlock(64, **kw, slot_memory="dram")
    n_groups = (len(regs.register_map(width=64, **kw)) + 7) // 8
    for g in range(n_groups):
        for wire_name in (f"read_sel_n{g}", f"read_hit_n{g}"):
            sources, cells = comb_cone(dut, wire_name)
            assert sources == {"read_match"}, (wire_name, sources)
            assert set(cells) <= {"$reduce_or", "$or", "$not"}, (wire_name, cells)


@pytest.mark.parametrize("w", [64, 256])
def test_split_read_takes_the_on_chip_cycles(w):
    """A CONTROL message of register reads and writes takes the same cycles with ``dram``
    (``split_read``: the match flags load with the address, the selects in EXEC as before) as
    in the on-chip block, and reads the same values."""
    ops = [(0, regs.ID, 0), (1, regs.group(1), 0b1011), (0, regs.group(1), 0), (0, regs.CONTROL_IN, 0),
           (0, regs.port_frames_in(1), 0), (0, 0x7777, 0), (1, regs.LOCAL_IP, 5), (0, regs.LOCAL_IP, 0)]

    def run(slot_memory: str) -> tuple[list[int], int]:
        dut = ControlBlock(w, ports=2, slots=16, elements=64, groups=4, jobs=2, slot_memory=slot_memory)
        sim = Simulator(dut)
        sim.add_clock(1e-8)
        out = {"now": 0}

        async def clock(ctx):
            async for _ in ctx.tick():
                out["now"] += 1

        async def tb(ctx):
            out["vals"] = await transact(ctx, dut, ops, w)
            out["cycles"] = out["now"]

        sim.add_testbench(clock, background=True)
        sim.add_testbench(tb)
        sim.run()
        return out["vals"], out["cycles"]

    vals, cycles = run("dram")
    assert vals == [regs.CORE_ID, 0b1011, 0b1011, 1, 0, 0, 5, 5]
    assert (vals, cycles) == run("onchip")


@pytest.mark.parametrize("slot_memory", ["onchip", "dram"])
def test_each_read_group_has_its_own_select_with_split_read(slot_memory):
    """With ``dram`` (``split_read``) every group of 8 registers is selected by its own
    flip-flops (``read_sel_r{g}``, decoded from the address with the group's cases only): no
    select flip-flop reaches more than one group's ``read_group`` register, so no select net
    fans out to every group's 32 multiplexers (``ridx`` -> ``read_group2``, 16 endpoints,
    10.34 ns at session 41's seed 3). Without it (the other cores, RTL unchanged) ``ridx``
    reaches every group: the before-case. test_every_address_reads_its_own_register checks
    every address's value through the selects."""
    dut = ControlBlock(64, ports=2, slots=16, elements=256, groups=4, jobs=2, slot_memory=slot_memory)
    n = len(regs.register_map(ports=2, slots=16, elements=256, groups=4, jobs=2, width=64))
    n_groups = (n + 7) // 8
    srcs = ([f"read_sel_r{g}" for g in range(n_groups)] + [f"read_hit{g}" for g in range(n_groups)]
            if slot_memory == "dram" else ["ridx"])
    table = comb_cells_table(dut, srcs, [f"read_group{g}" for g in range(n_groups)])
    reach = {s: [g for g in range(n_groups) if sum(table[s, f"read_group{g}"].values())] for s in srcs}
    if slot_memory == "dram":
        assert reach == {f"read_{k}{g}": [g] for k in ("sel_r", "hit") for g in range(n_groups)}, reach
    else:
        assert reach == {"ridx": list(range(n_groups))}, reach


@pytest.mark.parametrize("slot_memory", ["dram", "records"])
def test_status_bits_follow_their_inputs(slot_memory):
    """STATUS bit 0 is ``mem_error``; bit 1 (RECORD_ERROR) is ``record_error``, and the RECORD_
    counters read ``record_counters``: ports only the records control block has (the others'
    RTL unchanged: no port, the bit reads 0, the counters' addresses are unmapped)."""
    dut = ControlBlock(64, ports=1, slots=64, elements=16, groups=2, jobs=2, slot_memory=slot_memory)
    records = slot_memory == "records"
    assert ("record_error" in dut.signature.members) == ("record_counters" in dut.signature.members) == records
    counters = {name: 0x1234_0000 + 7 * i for i, name in enumerate(regs.RECORD_COUNTERS)}
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def tb(ctx):
        seen = []
        for mem, rec in ((0, 0), (1, 0), (0, 1), (1, 1)):
            ctx.set(dut.mem_error, mem)
            if records:
                ctx.set(dut.record_error, rec)
            (status,) = await transact(ctx, dut, [(0, regs.STATUS, 0)], 64)
            seen.append(status)
        bit1 = regs.STATUS_RECORD_ERROR if records else 0
        assert seen == [0, regs.STATUS_MEM_ERROR, bit1, regs.STATUS_MEM_ERROR | bit1]
        if records:
            for name, v in counters.items():
                ctx.set(dut.record_counters[name], v)
        got = await transact(ctx, dut, [(0, regs.record_counter(n), 0) for n in counters], 64)
        assert got == (list(counters.values()) if records else [0] * len(counters))

    sim.add_testbench(tb)
    sim.run()


@pytest.mark.parametrize("w", [64, 256])
def test_cfg_written_marks_every_group_and_job_cfg_write(w):
    """With ``dram`` (``cfg_strobe``) ``cfg_written`` is high in exactly the cycles after EXEC
    wrote a GROUP or JOB_CFG register: every cycle in which ``group_bitmap`` / ``job_cfg``
    differ from the last cycle's is one (the reducer's early decode holds a beat on it in
    place of comparing them, ``InputStages(cfg_strobe=True)``), a write of the value they hold
    is one too, and writes of other registers, reads and window resets (JOB_HEAD) are none.
    The other cores have no such output."""
    groups, jobs = 3, 2
    assert "cfg_written" not in ControlBlock(w, ports=1, slots=16, elements=64, groups=groups, jobs=jobs).signature.members
    dut = ControlBlock(w, ports=1, slots=16, elements=64, groups=groups, jobs=jobs, slot_memory="dram")
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    cfg = regs.pack_job_cfg(enabled=True, log2_window=3, base=8)
    messages = [
        [(1, regs.group(1), 0b1011), (0, regs.group(1), 0), (1, regs.CTRL, 1)],
        [(1, regs.job_cfg(1), cfg), (1, regs.group(1), 0b1011), (1, regs.LOCAL_IP, 5), (1, regs.group(2), 7),
         (1, regs.group(0), 0), (1, regs.job_cfg(0), cfg ^ 1), (0, regs.job_cfg(1), 0)],
        [(1, regs.job_head(0), 99), (1, regs.job_cfg(1), 0), (1, regs.MAX_ELEMENTS, 12), (0, regs.ID, 0)],
    ]
    writes = sum(op[0] and (op[1] in [regs.group(g) for g in range(groups)] + [regs.job_cfg(j) for j in range(jobs)])
                 for msg in messages for op in msg)
    seen = {"strobes": 0, "changes": 0, "done": False}

    def state(ctx):
        return ([ctx.get(dut.group_bitmap[g]) for g in range(groups)],
                [ctx.get(dut.job_cfg[j].as_value()) for j in range(jobs)])

    async def monitor(ctx):
        last = state(ctx)
        while not seen["done"]:
            await ctx.tick()
            now = state(ctx)
            strobe = ctx.get(dut.cfg_written)
            assert strobe or now == last, "a change without cfg_written"
            seen["strobes"] += strobe
            seen["changes"] += now != last
            last = now

    async def tb(ctx):
        resets = []
        for msg in messages:
            await transact(ctx, dut, msg, w, head_ack=resets)
        await ctx.tick().repeat(4)
        seen["done"] = True
        assert resets == [(0, 99)]

    sim.add_testbench(monitor, background=True)
    sim.add_testbench(tb)
    sim.run()
    assert seen["strobes"] == writes == 7 and seen["changes"] == 5, seen  # two writes of the value held


@pytest.mark.parametrize("slot_memory", ["onchip", "dram"])
def test_reply_valid_is_a_flip_flop_with_dram(slot_memory):
    """With ``dram`` (``reply_reg``) the reply's ``m_msg.valid`` is one flip-flop
    (``reply_valid``, high exactly in REPLY), not the FSM state's decode: `control.fsm_state` ->
    the egress merger's select -> the result gate's `valid_r` was 8.10 ns at 27983de's seed 5.
    The on-chip block keeps the decode (its RTL pinned): the check's before-case, which the DRAM
    block had at 193bd2d. test_split_read_takes_the_on_chip_cycles checks the same cycles."""
    dut = ControlBlock(64, ports=1, slots=16, elements=64, groups=2, jobs=2, slot_memory=slot_memory)
    sources, cells = comb_cone(dut, "m_msg__valid")
    if slot_memory == "dram":
        # (the flip-flop drives the port: yosys names its output m_msg__valid)
        assert sources <= {"reply_valid", "m_msg__valid"} and not cells, (sources, cells)
    else:
        assert "fsm_state" in sources, sources


def test_exec_regs_take_the_fsm_decisions_off_the_state_decode():
    """With ``dram`` (``exec_regs``) the FSM's decisions are flip-flops loaded on the way into
    the state that reads them: no register write (``max_elements``, a GROUP / CTRL / JOB_CFG register)
    and no load of IDLE, LOAD or READBACK (``words_left``, ``beat``, ``value``, ...) reads
    ``fsm_state`` in its enable, the next
    state reads none of ``head_write`` / ``probe_rd`` / ``probe_ok_r``, and ``s_msg.ready`` /
    ``reset.valid`` are flip-flops (`control.ops_done` -> `probe_rd` -> `probe_ok_r` ->
    `control.fsm_state` 9.31 ns, `control.fsm_state` -> `we_max_el` -> `max_elements` 8.92 ns,
    `control.fsm_state` -> `words_left` 8.25 ns at cbcf8ab's seeds 3 / 4 / 1). Fails on 3a66ba7
    (every DRAM pair below had cells); the on-chip block keeps them (its RTL pinned)."""
    kw = dict(ports=1, slots=16, elements=64, groups=2, jobs=2)
    dsts = ["max_elements", "group1", "ctrl", "job_cfg0", "words_left", "beat", "value", "read_match",
            "reply", "ops_done", "head_write", "we_max_el", "control_in"]
    srcs = ["fsm_state", "head_write", "probe_rd", "probe_ok_r", "ops_done"]
    for slot_memory in ("onchip", "dram"):
        dut = ControlBlock(64, **kw, slot_memory=slot_memory)
        table = comb_cells_table(dut, srcs[:1], dsts)
        if slot_memory == "onchip":
            assert all(table["fsm_state", d] for d in dsts[:7]), table  # (read_match: dram only)
            continue
        assert not any(table.values()), table
        fsm = comb_cells_table(dut, srcs[1:], ["fsm_state"])
        assert not any(fsm[s, "fsm_state"] for s in ("head_write", "probe_rd", "probe_ok_r")), fsm
        for port, flop in (("s_msg__ready", "idle_r"), ("reset__valid", "reset_valid")):
            sources, cells = comb_cone(dut, port)
            assert sources <= {flop, port} and not cells, (port, sources, cells)


def test_exec_regs_decode_the_operations_a_cycle_before_they_load():
    """With ``dram`` (``exec_regs``) LOAD / READBACK load the EXEC flags (``exec_go``, ``wr_go``,
    ``reset_valid``, ``probe_wait``) and ``head_write`` / ``probe_rd`` / ``job_index`` /
    ``probe_job`` from flip-flops decoded a cycle earlier (the first operation's from ``s_msg`` in
    IDLE, the next one's and READBACK's ``ops_done`` every cycle): no address compare of the held
    ``beat`` and no ``words_left`` compare in front of them (`control.beat.data` -> `read_match` ->
    `probe_job` -> `probe_ok_r` -> `control.exec_go`, 8.33 ns at b7ad058's seed 1). Fails on
    c0aeba1 (``beat`` -> ``exec_go`` / ``wr_go`` / ``probe_wait`` / ``probe_job`` had the address
    compares, ``words_left`` -> ``exec_go`` / ``wr_go`` READBACK's ``<``). The on-chip block keeps
    its decode (its RTL pinned)."""
    kw = dict(ports=1, slots=16, elements=64, groups=2, jobs=2)
    dsts = ["exec_go", "wr_go", "reset_valid", "probe_wait", "head_write", "probe_rd", "job_index",
            "probe_job"]
    for slot_memory in ("onchip", "dram"):
        dut = ControlBlock(256, **kw, slot_memory=slot_memory)
        if slot_memory == "onchip":
            table = comb_cells_table(dut, ["beat"], dsts[4:])
            assert all(table.values()), table
            continue
        table = comb_cells_table(dut, ["beat", "words_left"], dsts + ["ops_done"])
        assert not any(v for (s, d), v in table.items() if d != "ops_done" or s == "beat"), table
        assert table["words_left", "ops_done"], table  # (IDLE's first beat: words_left < 2)


def _lockstep(w: int, seed: int, n_msgs: int) -> int:
    """The DRAM block with and without ``exec_regs`` side by side, fed the same random CONTROL
    messages (writes of every kind, MAX_ELEMENTS above E, window resets, PROBE_BITMAP reads, plain
    reads; multi-beat at W 256), random gaps between beats, a random ``m_msg.ready``, a random
    ``reset.ready`` and a stand-in reducer answering probes at random: every output equal in
    every cycle. Returns the reply beats seen and the beats sent (a reply beat per beat)."""
    import random

    from amaranth.hdl import Module

    rng = random.Random(seed)
    kw = dict(ports=1, slots=16, elements=64, groups=2, jobs=3, slot_memory="dram")
    new, old = ControlBlock(w, **kw), ControlBlock(w, **kw)
    old.exec_regs = False  # 3a66ba7's DRAM block (the flag's other branch: the unchanged code)
    top = Module()
    top.submodules.new, top.submodules.old = new, old
    addrs = ([regs.group(g) for g in range(2)] + [regs.job_cfg(j) for j in range(3)]
             + [regs.job_head(j) for j in range(3)] + [regs.job_probe(j) for j in range(3)]
             + [regs.job_probe_bitmap(j) for j in range(3)]
             + [regs.MAX_ELEMENTS, regs.CTRL, regs.LOCAL_IP, regs.SITE_ID, regs.ID, regs.CONTROL_IN, 0x7FF0])
    outs = ["s_msg.ready", "m_msg.valid", "m_msg.payload", "reset.valid", "reset.payload", "probe_job",
            "probe_chunk", "max_elements", "group_bitmap", "job_cfg", "local_ip", "site_id",
            "release_on_completion", "cfg_written"]

    def get(ctx, dut, path):
        v = dut
        for part in path.split("."):
            v = getattr(v, part)
        return ctx.get(v.as_value() if hasattr(v, "as_value") else v)

    def both(ctx, path, value):
        for dut in (new, old):
            v = dut
            for part in path.split("."):
                v = getattr(v, part)
            ctx.set(v.as_value() if isinstance(value, int) and hasattr(v, "as_value") else v, value)

    seen = {"replies": 0}

    async def tb(ctx):
        queue = []
        for _ in range(n_msgs):
            ops = [(rng.random() < 0.6, rng.choice(addrs), rng.choice([0, 1, 5, 63, 64, 65, 1000, rng.getrandbits(32)]))
                   for _ in range(rng.randint(1, 6))]
            words = ops_words(ops)
            beats = beats_of(words, w)
            queue += [{"data": b, "first": i == 0, "last": i == len(beats) - 1,
                       "hdr": {"msg_type": wire.MsgType.CONTROL, "element_count": len(words)}}
                      for i, b in enumerate(beats)]
        cycles = 0
        seen["beats"] = len(queue)
        while queue or seen["replies"] < seen["beats"]:
            cycles += 1
            assert cycles < 200 * seen["beats"], "stuck"
            if queue and rng.random() < 0.7:
                both(ctx, "s_msg.payload", queue[0])
                both(ctx, "s_msg.valid", 1)
            else:
                both(ctx, "s_msg.valid", 0)
            both(ctx, "m_msg.ready", rng.random() < 0.6)
            both(ctx, "reset.ready", rng.random() < 0.3)
            ok = rng.random() < 0.3
            both(ctx, "probe_ok", ok)
            both(ctx, "probe_bitmap", rng.getrandbits(32))
            both(ctx, "head", rng.getrandbits(96))
            for path in outs:
                a, b = get(ctx, new, path), get(ctx, old, path)
                assert a == b, (cycles, path, a, b)
            if get(ctx, new, "s_msg.ready") and queue and get(ctx, new, "s_msg.valid"):
                queue.pop(0)
            if get(ctx, new, "m_msg.valid") and get(ctx, new, "m_msg.ready"):
                seen["replies"] += 1
            await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return seen["replies"], seen["beats"]


@pytest.mark.parametrize(("w", "seed"), [(64, 1), (64, 2), (256, 3), (256, 4)])
def test_exec_regs_take_the_same_cycles_and_values(w, seed):
    """``exec_regs`` is exact: the DRAM block with it equals the block without it (3a66ba7's) in
    every output in every cycle under random messages and handshakes (``_lockstep``)."""
    replies, beats = _lockstep(w, seed, 40)
    assert replies == beats >= 40
