"""Session 47 (s47f): the DRAM reducer's cuts in the emitter's tag read, the emitter's header
FIFO and the probe (docs/benchmarks.md, "(session 47, s47f)"). Each structure test fails on
3a66ba7 for the DRAM reducer; the on-chip reducer (its RTL pinned by tests/test_default_rtl.py)
keeps the old structure, the before-case. The exactness: the random tests here and in
tests/test_reducer_parts.py (the emitter's and the assembler's with the DRAM options)."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib.memory import Memory
from stream_helpers import _yosys_on, comb_cone, pack, run_testbench

from wanreduce.hdl.reducer import Reducer
from wanreduce.hdl.reducer_layouts import ACTIVE, DONE, FREE, slot_tag_layout
from wanreduce.hdl.tag_probe import TagProbe


def _small_reducer(slot_memory: str) -> Reducer:
    dram = slot_memory == "dram"
    return Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=slot_memory,
                   **({"outstanding": 8, "index_bits": 3} if dram else {}))


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_emitter_tag_read_address_is_a_flip_flop_with_dram(slot_memory: str) -> None:
    """With the DRAM store the emitter's tag read address (``tag_rd_e``) is ``emitter.multi_at``,
    the flip-flop loaded with the ``multi`` read's address, not ``slot_n``'s multiplexer of
    ``rest_slot`` and the queue head's slot (`emitter.rest_slot` -> the LUT RAM -> `emitter.hdr`,
    8.17 ns at session 46's landing seed 5). Fails on 3a66ba7 (the DRAM reducer read at
    ``slot_n``); the on-chip reducer keeps ``slot_n``: the before-case."""
    dram = slot_memory == "dram"
    sources, cells = comb_cone(_small_reducer(slot_memory), "tag_rd_e__addr")
    if dram:
        assert sources == {"emitter.multi_at"} and not cells, (sorted(sources), cells)
    else:
        assert {"emitter.rest_slot", "emitter.rest_nz"} <= sources, sorted(sources)


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_emitter_header_fifo_write_reads_no_level_with_dram(slot_memory: str) -> None:
    """With the DRAM store the emitter's header FIFO (``assembler.hdr_e``) is an
    ``UnguardedFIFO``: its LUT RAM's write enable (``wp__en``, also its write pointer's count
    enable) is the emitter's push alone, no level and no ``w_rdy`` (`assembler.level` ->
    `emitter.just_started`'s LUT -> `assembler.level`, 8.30 ns at session 46's landing seed 6).
    Fails on 3a66ba7 (a ``SyncFIFO``, no ``wp__en``: its ``w_port__en`` is ``w_en & w_rdy``,
    ``w_rdy`` from ``level``); on chip, that ``SyncFIFO``: the before-case."""
    dram = slot_memory == "dram"
    sources, _ = comb_cone(_small_reducer(slot_memory), "assembler.hdr_e." + ("wp__en" if dram else "w_port__en"))
    level = {w for w in sources if "level" in w}
    assert (not level) == dram, sorted(sources)
    assert "emitter.just_started" in sources, sorted(sources)


STOP = "-$dff,$memrd,$memrd_v2"


@pytest.mark.parametrize("slot_memory", ["dram", "onchip"])
def test_the_probe_slot_and_answer_with_dram(slot_memory: str) -> None:
    """With the DRAM store (``TagProbe(registered_key, registered_data, held_first)``): the key's
    job (``probe.k_job``) enters no adder, AND or compare with a constant on its way to the probed
    slot, only the multiplexer choosing among the slots worked out for each job (`probe.k_job` ->
    `probe.rd_addr` 8.42 ns at session 46's landing seed 5: the job-table select, the window mask,
    the adder); and ``probe_bitmap``'s next value reads ``q_held`` and ``q_bitmap``, not the tag
    read's data (``rd_data``) through the compares (`probe`'s key -> the job compare ->
    `probe_bitmap`, 8.40 ns there). Fails on 3a66ba7 (both); the on-chip reducer (no ``k_job``,
    no ``registered_data`` at S 8) reads the tag data into ``probe_bitmap``: the before-case."""
    dram = slot_memory == "dram"
    logic = "t:$add t:$and %u t:$gt %u t:$lt %u t:$sub %u"
    fwd, bwd = _yosys_on(_small_reducer(slot_memory), (
        (f"select -set fwd w:probe.k_job %co*:{STOP}; select -write fwd.txt @fwd {logic} %i; " if dram
         else "select -write fwd.txt w:probe.k_job; ")
        + f"select -set bwd w:probe.probe_bitmap %ci1:+$dff[Q] %ci1:+$dff[D] %ci*:{STOP}; "
        "select -write bwd.txt @bwd w:* %i"), "fwd.txt", "bwd.txt")
    if dram:
        assert not fwd.split(), fwd  # (on chip there is no k_job)
    wires = {ln.split("/", 1)[1] for ln in bwd.split()}
    read_data = wires & {"rd_data", "tag_rd_p__data", "probe.rd_data"}  # (the tag read's data, as named)
    assert (not read_data) == dram, sorted(wires)
    assert ({"probe.q_held", "probe.q_bitmap"} <= wires) == dram, sorted(wires)


class _TwoProbes(Elaboratable):
    """Two ``TagProbe``s, ``registered_data`` with and without ``held_first``, each on a read
    port of the same tag memory (2 jobs), with its write port, the pending bit and the key
    shared."""

    def __init__(self, tags: list[int], slots: int, registered_key: bool) -> None:
        self.slots, self.tags = slots, tags
        kw = dict(slots=slots, jobs=2, pending_bit=True, registered_key=registered_key, registered_data=True)
        self.a, self.b = TagProbe(**kw), TagProbe(**kw, held_first=True)
        self.wr_en, self.wr_addr = Signal(), Signal(range(slots))
        self.wr_data = Signal(slot_tag_layout(2))
        self.pending = Signal()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.a, m.submodules.b = self.a, self.b
        m.submodules.tags = mem = Memory(shape=slot_tag_layout(2), depth=self.slots, init=self.tags)
        wr = mem.write_port()
        m.d.comb += [wr.en.eq(self.wr_en), wr.addr.eq(self.wr_addr), wr.data.eq(self.wr_data)]
        for pr in (self.a, self.b):
            rd = mem.read_port(transparent_for=())
            m.d.comb += [rd.addr.eq(pr.rd_addr), rd.en.eq(1), pr.rd_data.eq(rd.data),
                         pr.pending.eq(self.pending), pr.wr_en.eq(self.wr_en), pr.wr_addr.eq(self.wr_addr)]
            m.d.comb += [pr.job_cfg.eq(self.a.job_cfg), pr.probe_job.eq(self.a.probe_job),
                         pr.probe_chunk.eq(self.a.probe_chunk)] if pr is self.b else []
        return m


def _slot_of(base: int, log2_window: int, chunk: int, slots: int) -> int:
    return (base + (chunk & ((1 << log2_window) - 1))) % slots


@pytest.mark.parametrize(("seed", "registered_key"), [(1, True), (2, True), (3, False)])
def test_tag_probe_held_first_is_registered_data_cycle_for_cycle(seed: int, registered_key: bool) -> None:
    """``held_first`` (the DRAM reducer's probe) answers as ``registered_data`` without it, cycle
    for cycle (``probe_bitmap``, ``probe_ok``), under random keys of two jobs, random job
    configurations, random tag writes (reads meeting them unused) and a random pending bit; and
    with ``registered_key`` the probed slot (``rd_addr``) is ``slot_of`` of the key two cycles
    ago (the slot worked out for each job, the key's job choosing last)."""
    rng, slots = random.Random(seed), 16
    lay = slot_tag_layout(2)

    def rand_tag(i: int) -> dict:
        return dict(state=rng.choice((FREE, ACTIVE, DONE)), job=rng.randrange(2),
                    chunk=i + slots * rng.randrange(3), bitmap=rng.getrandbits(32))

    init = [rand_tag(i) for i in range(slots)]
    first = [(t["job"], t["chunk"]) for t in init]
    top = _TwoProbes([lay.const(t) for t in init], slots, registered_key)
    a, b = top.a, top.b

    async def tb(ctx):
        cfgs = [(0, 4), (0, 4)]
        keys, seen = [], {"ok": 0, "held": 0}
        for cycle in range(1500):
            if rng.random() < 0.03:  # a new configuration of one job, often back to the identity
                cfgs[rng.randrange(2)] = rng.choice([(0, 4), (0, 4), (rng.randrange(slots), rng.randrange(5))])
            for j, (base, lw) in enumerate(cfgs):
                ctx.set(a.job_cfg[j].enable, 1)
                ctx.set(a.job_cfg[j].base, base)
                ctx.set(a.job_cfg[j].log2_window, lw)
            if rng.random() < 0.2:  # a new key, often a tag's as it was at first
                job, chunk = rng.choice(first + [(rng.randrange(2), rng.randrange(3 * slots))])
                ctx.set(a.probe_job, job)
                ctx.set(a.probe_chunk, chunk)
            keys.append((ctx.get(a.probe_job), ctx.get(a.probe_chunk), list(cfgs)))
            w = rng.random() < 0.1
            ctx.set(top.wr_en, w)
            ctx.set(top.wr_addr, rng.randrange(slots))
            ctx.set(top.wr_data.as_value(), pack(lay, rand_tag(rng.randrange(slots))))
            ctx.set(top.pending, rng.random() < 0.5)
            got_a = (ctx.get(a.probe_bitmap), ctx.get(a.probe_ok))
            got_b = (ctx.get(b.probe_bitmap), ctx.get(b.probe_ok))
            assert got_a == got_b, f"cycle {cycle}: {got_a} != {got_b}"
            seen["ok"] += got_a[1]
            seen["held"] += got_a[1] and got_a[0] != 0
            if registered_key and len(keys) > 2:
                job, chunk, _ = keys[-3]  # the key two cycles ago, the configuration one cycle ago
                base, lw = keys[-2][2][job]
                want = _slot_of(base, lw, chunk, slots)
                assert ctx.get(b.rd_addr) == ctx.get(a.rd_addr) == want, (cycle, job, chunk)
            await ctx.tick()
        assert seen["ok"] > 200 and seen["held"] > 10, seen

    run_testbench(top, tb)
