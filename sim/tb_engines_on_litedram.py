"""cocotb bench of the two read-modify-write engines through the board's real DRAM path
(``hdl/boards/litedram_model_engines.py``: the sums' store on AXI ID 0 and the scaffold record
engine on ID 1 through ``AxiIdArbiter``, the board's 64 -> 128-bit ``AxiUpsizer``, LiteDRAM's
AXI frontend and controller on ``SDRAMPHYModel``), run by tests/test_engines_on_litedram.py and
bench/bench_engines_litedram.py.

The pieces are the two benches it composes: the clocks, ``init_done`` and the first WRITE of
every row of ``sim/tb_slot_store_litedram.py`` (``start_clocks``, ``ModelBench.fill``), and the
random commands of ``sim/tb_slot_store.py``, to both engines at once, each response checked
against its engine's own reference in order (``SlotStoreModel``; ``RecordModel``, the scaffold
modify's twin). The arbiter's ``m_axi_mem`` (``dut.engines.arbiter``: the port the upsizer carries with
two IDs) is watched: every AR / AW burst goes to its ID's bench (checked there: whole rows, in
the engine's region, INCR, within 4 KiB), and the **order** the path returns is checked beat by
beat: each R beat carries the ID of the oldest AR burst not yet fully read and ``rlast`` on its
last beat, each B the ID of the oldest AW not yet answered — the property the upsizer's
in-order pairing needs (docs/large_slots.md, "How a 256-bit record travels"). The bench also
counts the bursts accepted while a burst of the other ID was still outstanding (evidence that
the two IDs were in flight together). ``error`` / ``dropped`` (arbiter), ``upsizer_error`` and
both ``mem_error`` must stay 0.

Tests: ``random_commands_both`` and ``throughput_mixed`` (the sums' messages, spread as in
``tb_slot_store_litedram.throughput``, with ``records`` set: one record command per message,
offered when the message's first row is, the chunk's first contribution a WRITE and the others
ADD; the steady-state rate and DRAM efficiency of the sums, and of the bus with the records'
bytes, to ``params["out"]``). Parameters (tb_params): data_width, sums, records (the engines'
parameters), seed, commands, p_cmd, p_rsp, message_beats, contributors, with_records, out.
"""

from __future__ import annotations

import statistics
from collections import deque

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from wanreduce.hdl.boards.litedram_controller import DRAM_CONFIGS
from wanreduce.hdl.slot_store_signature import Op
from wanreduce.sim.simulator import tb_params
from wanreduce.sim.tb_slot_store import (
    _message_commands,
    run_random_together,
    steady_rate,
)
from wanreduce.sim.tb_slot_store_litedram import (
    ModelBench,
    _write_out,
    add_share,
    dram_bytes_per_s,
    start_clocks,
)


class PathWatch:
    """The arbiter's ``m_axi_mem`` (``dut.engines.arbiter``): bursts to their ID's bench, R and B
    checked against the AR and AW order; ``mixed``: bursts accepted while the other ID had one
    outstanding, per channel."""

    def __init__(self, dut, benches: dict[int, ModelBench]) -> None:
        self.dut, self.benches = dut, benches
        self.reads: deque[list[int]] = deque()  # [id, beats left] per AR burst not fully read
        self.writes: deque[int] = deque()  # id per AW burst not yet answered by B
        self.mixed = {"ar": 0, "aw": 0}
        self.beats = {"r": {i: 0 for i in benches}, "b": {i: 0 for i in benches}}

    async def run(self) -> None:
        axi = self.dut.engines.arbiter  # (engines: its ports and the engines' share names)
        while True:
            await RisingEdge(self.dut.clk)
            await ReadOnly()

            def go(ch: str) -> bool:
                return bool(int(getattr(axi, f"m_axi_mem_{ch}valid").value)
                            and int(getattr(axi, f"m_axi_mem_{ch}ready").value))

            for ch in ("ar", "aw"):
                if not go(ch):
                    continue
                i = int(getattr(axi, f"m_axi_mem_{ch}id").value)
                assert i in self.benches, f"{ch} with ID {i}"
                beats = int(getattr(axi, f"m_axi_mem_{ch}len").value) + 1
                assert int(getattr(axi, f"m_axi_mem_{ch}burst").value) == 1, "not INCR"
                self.benches[i].bursts.append((ch, int(getattr(axi, f"m_axi_mem_{ch}addr").value), beats))
                pending = [r[0] for r in self.reads] if ch == "ar" else list(self.writes)
                self.mixed[ch] += any(j != i for j in pending)
                if ch == "ar":
                    self.reads.append([i, beats])
                else:
                    self.writes.append(i)
            if go("r"):
                assert self.reads, "an R beat with no AR burst outstanding"
                head = self.reads[0]
                rid, last = int(axi.m_axi_mem_rid.value), int(axi.m_axi_mem_rlast.value)
                assert rid == head[0], \
                    f"R beat with ID {rid}, the oldest outstanding AR burst has ID {head[0]}: reordered"
                head[1] -= 1
                assert last == (head[1] == 0), f"rlast {last} with {head[1]} beats of the burst left"
                self.beats["r"][rid] += 1
                if head[1] == 0:
                    self.reads.popleft()
            if go("b"):
                assert self.writes, "a B with no AW burst outstanding"
                bid, want = int(axi.m_axi_mem_bid.value), self.writes.popleft()
                assert bid == want, f"B with ID {bid}, the oldest unanswered AW has ID {want}: reordered"
                self.beats["b"][bid] += 1

    def summary(self) -> dict:
        return {"mixed": self.mixed, "r_beats": self.beats["r"], "b": self.beats["b"]}


async def _start(dut, p: dict) -> tuple[ModelBench, ModelBench, PathWatch, list]:
    """Clocks and init; the watch; every row of both regions written (at once); the benches,
    the watch and the two references."""
    w = p["data_width"]
    sums = ModelBench(dut, {"data_width": w, "seed": p.get("seed", 1), **p["sums"]})
    recs = ModelBench(dut, {"data_width": w, "seed": p.get("seed", 1) + 1000, **p["records"],
                            "model": "record"}, prefix="rec_")
    await start_clocks(dut, sums.cfg, ("", "rec_"))
    watch = PathWatch(dut, {0: sums, 1: recs})
    cocotb.start_soon(watch.run())
    fills = [cocotb.start_soon(b.fill()) for b in (sums, recs)]
    models = [await f for f in fills]
    return sums, recs, watch, models


async def _finish(dut, watch: PathWatch, benches: tuple[ModelBench, ...]) -> dict:
    """After the last response: the last write-backs answered (a response leaves before its
    row's write is), then the bursts and every error flag checked."""
    for _ in range(5000):
        await ClockCycles(dut.clk, 1)
        if not watch.reads and not watch.writes:
            break
    await ClockCycles(dut.clk, 2)
    for b in benches:
        b.check_bursts()
    assert not int(dut.mem_error.value) and not int(dut.rec_mem_error.value), "mem_error set"
    assert not int(dut.error.value) and not int(dut.dropped.value), \
        f"arbiter error {int(dut.error.value)}, dropped {int(dut.dropped.value)}"
    assert not int(dut.upsizer_error.value), "the converter saw a burst it cannot convert"
    assert not watch.reads and not watch.writes, \
        f"bursts left without their responses: {len(watch.reads)} AR, {len(watch.writes)} AW"
    return watch.summary()


@cocotb.test()
async def random_commands_both(dut):
    """Both engines at once, random commands under random cmd / rsp handshakes: every response
    as its engine's reference, R and B in AR and AW order with their IDs."""
    p = tb_params()
    sums, recs, watch, models = await _start(dut, p)
    await run_random_together((sums, recs), models, p)
    result = await _finish(dut, watch, (sums, recs))
    result["bursts"] = {i: len(b.bursts) for i, b in ((0, sums), (1, recs))}
    _write_out(p, result)
    assert all(v > 0 for v in watch.mixed.values()), f"the two IDs never overlapped: {result}"


def _record_commands(sums: ModelBench, recs: ModelBench, n_sums: int) -> list[tuple]:
    """One record command per message of ``_message_commands`` (its chunk's record: WRITE for
    the chunk's first contribution, ADD for the others), as ``_message_commands`` orders them."""
    beats, contributors = sums.p.get("message_beats", 32), sums.p.get("contributors", 3)
    chunks = sums.rows // beats
    assert chunks <= recs.rows, f"{chunks} chunks, {recs.rows} records"
    cmds = []
    for m in range(-(-n_sums // beats)):
        chunk, nth = m % chunks, m // chunks % contributors
        cmds.append((int(Op.WRITE if nth == 0 else Op.ADD), chunk, recs.rng.getrandbits(recs.width),
                     (1 << (recs.width // 32)) - 1, 0))
    return cmds


@cocotb.test()
async def throughput_mixed(dut):
    """The sums' reducer traffic with (``with_records``) or without a record access per message:
    the sums' steady-state rate and the DRAM efficiency, sums only and the bus's."""
    p = tb_params()
    sums, recs, watch, models = await _start(dut, p)
    beats = p.get("message_beats", 32)
    sums.p.update(message_beats=beats, contributors=p.get("contributors", 3))
    cmds = _message_commands(sums, p.get("commands", 2000))
    first = len(sums.bursts)  # the fill's bursts before
    runs = [cocotb.start_soon(sums.run(cmds, models[0], p_cmd=1.0, p_rsp=1.0))]
    rec_cmds = []
    if p.get("with_records", True):
        rec_cmds = _record_commands(sums, recs, len(cmds))
        runs.append(cocotb.start_soon(recs.run(rec_cmds, models[1], p_cmd=1.0, p_rsp=1.0,
                                               gate=lambda i: sums.sent > i * beats)))
    stamps = await runs[0]
    for run in runs[1:]:
        await run
    result = await _finish(dut, watch, (sums, recs))
    rate, adds, cfg = steady_rate(stamps), add_share(cmds), DRAM_CONFIGS[p.get("board", "versa-ecp5")]
    moved = dram_bytes_per_s(rate, adds, sums.row_bytes)
    # a record command per message: its record written, and read if an ADD (32 B each way)
    rec_moved = dram_bytes_per_s(rate / beats, add_share(rec_cmds), recs.row_bytes) if rec_cmds else 0.0
    result.update(rate=rate, adds=adds, cycles=stamps[-1], commands=len(cmds),
                  record_commands=len(rec_cmds), dram_bytes_per_s=moved,
                  dram_efficiency=moved / cfg.peak_bytes_per_s,
                  bus_efficiency=(moved + rec_moved) / cfg.peak_bytes_per_s,
                  **{f"mean_{ch}_burst": statistics.mean(
                      [n for c, _, n in sums.bursts[first:] if c == ch] or [0])
                     for ch in ("ar", "aw")})
    _write_out(p, result)
