"""cocotb bench of a slot store (``hdl/slot_store_signature.py``) against its Python reference
(``sim/slot_store_model.py``: the golden model's saturating int32 add), run by
tests/test_dram_slot_store.py and bench/bench_dram_store.py through sim.simulator.run_cocotb.

Any backend: the bench drives ``cmd`` and takes ``rsp`` itself, every cycle. A DUT with an
``m_axi_mem_*`` port (the DRAM backend, in ``DramSlotStoreHarness``: delay lines on R and B,
``latency`` input) gets cocotbext-axi's ``AxiRam`` on it, filled with random rows (the
reference reads the same bytes for a row never written), with pause generators on every
channel (ready on AW/W/AR, valid on B/R). Every AR/AW burst is recorded and checked: INCR,
within 4 KiB, at most ``burst_beats`` beats, inside the store's region, with ID ``axi_id``.
``model`` = ``"record"`` checks the read-modify-write engine with the scaffold record modify
(``hdl/record_modify_scaffold.py``) against ``sim/record_model.py`` instead of the sums.

Tests:
- ``random_commands``: random ops on clustered rows (runs of consecutive rows, many repeats so
  commands hit rows in flight, 15 % the previous command's row again), saturating data, random lane masks; random ``cmd`` valid and
  ``rsp`` ready; ``latency`` re-drawn from ``latency_range`` every few hundred cycles. Every
  response must equal the reference's, in order; ``mem_error`` must stay 0; then the memory
  holds the reference's rows at their addresses and nothing else changed. With ``set_waits``
  ("some" / "none") the DUT's ``set_waits`` (cycles commands waited for a set conflict in the
  in-flight index) must be > 0 / 0 at the end.
- ``long_runs`` (``model`` = ``"record"`` with ``jobs``): each job in turn toggles the pending
  bits of ``run_lengths`` slots behind its head, one length at a time, then releases at its head
  (runs of 0 .. S - 1, wrapping at S), other jobs' WRITE / READ commands mixed in; every
  response, every released part, the final heads and pending bits as the twin's; with
  ``release_depth`` (the state's release queue) a consumer ready with probability
  ``p_release`` takes every part from the stream ``release``, in order; with ``job_regions``
  ((base, log2 window) per job, on the state's ``region`` inputs) runs wrap in the job's region
  and window resets (stream ``reset``) come first for every job and after each length for one,
  each offered once the commands before it are answered.
- ``throughput``: messages of ``message_beats`` consecutive rows, the first contribution of a
  chunk WRITE then ADDs, ``cmd`` always valid and ``rsp`` always ready, fixed ``latency``,
  ``bandwidth`` (share of cycles R and W may move: random pauses). Writes beats per
  cycle (steady state: the middle half of the responses) to ``params["out"]`` if given and
  checks it is at least ``min_rate`` and the mean read and write bursts at least ``min_mean_burst``
  beats; with ``spread`` traffic, that exactly the ADDs read a row
  (a WRITE never reads).
Parameters (tb_params): data_width, slots, row_bits, burst_beats, base_address, seed, commands,
p_cmd, p_rsp, p_axi, latency_range / latency, bandwidth, message_beats, contributors, spread,
min_rate, min_mean_burst, out, model ("sums" or "record"), axi_id (default 0), row_width
(default data_width: the engine's rows of R/W beats each), side_width (the engine's side input:
a random ``cmd.side`` per command, given to the model and checked echoed on ``rsp.side``),
row_stride / row_offset (the engine's strided address map: row r at base_address + r *
row_stride + row_offset; every burst then exactly one row at its strided address, and after the
run every row in memory equals the model's and the bytes between rows are untouched), jobs (the
scaffold engine's ``DecisionState``, ``ScaffoldEngineHarness(jobs=...)``: the model tracks each
job's head and each row's pending bit; the side's top bit is the release flag: the run behind
the job's head released; after the random commands one ADD per job and row that changes
neither shows every head and pending bit in its response, every run the state released
(``released``) is the twin's, runs of 0, 1 and more slots happened, and ``state_error`` stays 0).
"""

from __future__ import annotations

import json
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from wanreduce.hdl.decision_state import head_layout, region_layout, released_layout
from wanreduce.hdl.layouts import ResetLayout
from wanreduce.hdl.record_release_queue import release_item_layout
from wanreduce.hdl.slot_store_signature import TAG_BITS, Op, cmd_layout, rsp_layout
from wanreduce.sim.axi_memory import attach_ram, random_axi_pauses, steady_rate, throttle_data
from wanreduce.sim.record_model import RecordModel, region_slot
from wanreduce.sim.simulator import tb_params
from wanreduce.sim.slot_store_model import SlotStoreModel

CLOCK_NS = 4
PAGE = 4096
MODELS = {"sums": SlotStoreModel, "record": RecordModel}  # params["model"] -> the reference


def _pack(layout, **fields: int) -> int:
    """Fields -> the bits of a flattened struct port."""
    word = 0
    for name, f in layout:
        word |= (fields[name] & ((1 << f.width) - 1)) << f.offset
    return word


def _unpack(layout, word: int) -> dict[str, int]:
    return {name: (word >> f.offset) & ((1 << f.width) - 1) for name, f in layout}


class Bench:
    """Clock, reset, the memory (if the DUT has an AXI port) and the reference."""

    def __init__(self, dut, p: dict, prefix: str = "") -> None:
        self.dut, self.p, self.prefix = dut, p, prefix  # prefix: of the cmd / rsp ports
        self.width = p.get("row_width", p["data_width"])  # rows, commands, responses
        self.beat_bytes = p["data_width"] // 8  # the AXI data
        self.rows = p["slots"] << p["row_bits"]
        self.address_bits = self.rows.bit_length() - 1
        self.side_width = p.get("side_width")
        self.cmd_layout = cmd_layout(self.width, self.address_bits, TAG_BITS, self.side_width)
        self.rsp_layout = rsp_layout(self.width, TAG_BITS, self.side_width)
        self.rng = random.Random(p.get("seed", 1))
        self.base = p.get("base_address", 0)
        self.row_bytes = self.width // 8
        self.stride = p.get("row_stride") or self.row_bytes  # bytes from one row to the next
        self.offset = p.get("row_offset", 0)  # a row's first byte in its stride
        self.content = b""  # the memory's bytes from base_address at the start
        self.ram = None
        self.bursts: list[tuple[str, int, int]] = []  # (channel, address, beats)
        self.regions = [tuple(r) for r in p["job_regions"]] if p.get("job_regions") else None  # (base, log2 window)

    async def start(self) -> SlotStoreModel:
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
        dut.rst.value = 1
        if hasattr(dut, "cmd__valid"):  # (a harness may feed the store itself: the payload gate)
            dut.cmd__valid.value = 0
        dut.rsp__ready.value = 0
        if self.regions:  # the state's per-job regions, held; no window reset yet
            layout = region_layout(self.rows)
            dut.region.value = sum(_pack(layout, base=base, log2_window=lw) << (j * layout.size)
                                   for j, (base, lw) in enumerate(self.regions))
            dut.reset__valid.value = 0
        if hasattr(dut, "m_axi_mem_awaddr"):
            size = self.base + self.rows * self.stride
            self.ram = attach_ram(dut, size)
            content = self.content = self.rng.randbytes(self.rows * self.stride)
            self.ram.write(self.base, content)

            def initial(row: int) -> int:
                at = self.address(row) - self.base
                return int.from_bytes(content[at:at + self.row_bytes], "little")

            dut.latency.value = self.p.get("latency", 20)
            cocotb.start_soon(self._watch_bursts())
        else:
            def initial(row: int) -> int:  # on-chip backends: block RAM starts at zero
                return 0
        await ClockCycles(dut.clk, 4)
        dut.rst.value = 0
        await RisingEdge(dut.clk)
        state = {"jobs": self.p["jobs"], "slots": self.rows, "release_bit": self.side_width - 1} \
            if self.p.get("jobs") else {}
        if self.regions:
            state["regions"] = self.regions
        return MODELS[self.p.get("model", "sums")](self.width, initial, **state)

    def address(self, row: int) -> int:
        """The byte address of ``row`` (dense: row_stride = the row's bytes, offset 0)."""
        return self.base + row * self.stride + self.offset

    async def check_memory(self, model: SlotStoreModel, *, wait: int = 5000) -> None:
        """Once the engine's writes have landed (polled for up to ``wait`` cycles): every row the
        model holds is in memory at its address, and every other byte is as it started (the
        gaps between strided rows, the rows never written)."""
        want = bytearray(self.content)
        for row, value in model.rows.items():
            at = self.address(row) - self.base
            want[at:at + self.row_bytes] = value.to_bytes(self.row_bytes, "little")
        for _ in range(wait // 100):
            if self.ram.read(self.base, len(want)) == want:
                return
            await ClockCycles(self.dut.clk, 100)
        got = self.ram.read(self.base, len(want))
        first = next(i for i in range(len(want)) if got[i] != want[i])
        raise AssertionError(f"memory at {self.base + first:#x} (row {first // self.stride}, byte "
                             f"{first % self.stride} of its stride) is {got[first]:#x}, want {want[first]:#x}")

    def random_axi_pauses(self, busy: float) -> None:
        random_axi_pauses(self.ram, self.rng, busy)

    def throttle_data(self, bandwidth: float) -> None:
        """R and W move on a random ``bandwidth`` share of the cycles (pauses in runs of 1..8)."""
        throttle_data(self.ram, self.rng, bandwidth)

    async def _watch_bursts(self) -> None:
        dut = self.dut
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            for ch in ("aw", "ar"):
                if int(getattr(dut, f"m_axi_mem_{ch}valid").value) and \
                        int(getattr(dut, f"m_axi_mem_{ch}ready").value):
                    self.bursts.append((ch, int(getattr(dut, f"m_axi_mem_{ch}addr").value),
                                       int(getattr(dut, f"m_axi_mem_{ch}len").value) + 1))
                    assert int(getattr(dut, f"m_axi_mem_{ch}burst").value) == 1, "not INCR"
                    got_id = int(getattr(dut, f"m_axi_mem_{ch}id").value)
                    assert got_id == self.p.get("axi_id", 0), f"{ch} with ID {got_id}"

    def check_bursts(self) -> None:
        limit = self.p.get("burst_beats", 16)
        k = self.row_bytes // self.beat_bytes
        for ch, addr, beats in self.bursts:
            end = addr + beats * self.beat_bytes
            assert addr // PAGE == (end - 1) // PAGE, f"{ch} burst at {addr:#x} x{beats} crosses 4 KiB"
            assert beats <= limit, f"{ch} burst of {beats} beats > burst_beats {limit}"
            assert beats % k == 0 and (addr - self.base - self.offset) % self.stride == 0, \
                f"{ch} burst at {addr:#x} x{beats} is not whole rows of {k} beats at their addresses"
            assert self.stride == self.row_bytes or beats == k, \
                f"{ch} burst at {addr:#x} x{beats}: strided rows are not adjacent, a burst is one row"
            assert self.base <= addr and end <= self.base + self.rows * self.stride, \
                f"{ch} burst at {addr:#x} outside the store's region"

    async def run(self, commands: list[tuple[int, int, int, int, int]], model: SlotStoreModel, *,
                  p_cmd: float, p_rsp: float, on_cycle=None, gate=None, sides: list[int] | None = None) -> list[int]:
        """Drive ``commands`` (op, row, data, lanes, more; tag = index), check each response
        against ``model`` in order; returns the cycle of each response. ``gate(i)``: command
        ``i`` may be offered only while it is true (another engine's progress); ``self.sent``
        counts the commands taken so far (what another bench's gate looks at). With
        ``side_width`` each command gets a random side (or its own of ``sides``), given to the
        model and expected back on ``rsp.side``."""
        dut, rng = self.dut, self.rng
        if sides is None:
            sides = [rng.getrandbits(self.side_width) if self.side_width else 0 for _ in commands]
        expected = [(*model.apply(op, row, data, lanes, *([sides[i]] if self.side_width else [])),
                     i & ((1 << TAG_BITS) - 1), sides[i])
                    for i, (op, row, data, lanes, _more) in enumerate(commands)]
        cmd_valid, cmd_payload, cmd_ready = (getattr(dut, f"{self.prefix}cmd__{s}") for s in ("valid", "payload", "ready"))
        rsp_valid, rsp_payload, rsp_ready = (getattr(dut, f"{self.prefix}rsp__{s}") for s in ("valid", "payload", "ready"))
        sent, got, cycle, stamps = 0, 0, 0, []
        self.sent = 0
        offered = False
        idle_limit = 20000  # cycles without any response: the store is stuck
        last_progress = 0
        while got < len(commands):
            await RisingEdge(dut.clk)
            cycle += 1
            if on_cycle:
                on_cycle(cycle)
            if not offered:
                offered = sent < len(commands) and rng.random() < p_cmd and (gate is None or gate(sent))
                if offered:
                    op, row, data, lanes, more = commands[sent]
                    cmd_payload.value = _pack(self.cmd_layout, op=op, row=row, data=data,
                                                   lanes=lanes, tag=sent, more=more, side=sides[sent])
                cmd_valid.value = int(offered)
            ready = rng.random() < p_rsp
            rsp_ready.value = int(ready)
            await ReadOnly()
            if offered and int(cmd_ready.value):
                sent += 1
                self.sent = sent
                offered = False
            if ready and int(rsp_valid.value):
                r = _unpack(self.rsp_layout, int(rsp_payload.value))
                want = expected[got]
                assert (r["data"], r["overflow"], r["tag"], r.get("side", 0)) == want, (
                    f"{self.prefix}response {got} (op {commands[got][0]}, row {commands[got][1]}): got data "
                    f"{r['data']:#x} overflow {r['overflow']} tag {r['tag']} side {r.get('side', 0)}, want data "
                    f"{want[0]:#x} overflow {want[1]} tag {want[2]} side {want[3]}")
                got += 1
                stamps.append(cycle)
                last_progress = cycle
            assert cycle - last_progress < idle_limit, \
                f"no response for {idle_limit} cycles ({got} of {len(commands)} received)"
        return stamps


def random_row(rng: random.Random, lanes: int) -> int:
    """A row of ``lanes`` int32: 30 % near the limits (sums saturate), the others small."""
    big = [0x7FFFFFF0, -0x7FFFFFF0, 0x40000000, -0x40000000]
    vals = [rng.choice(big) if rng.random() < 0.3 else rng.randrange(-2**20, 2**20) for _ in range(lanes)]
    return sum((v & 0xFFFFFFFF) << (32 * k) for k, v in enumerate(vals))


def _random_commands(b: Bench, n: int) -> list[tuple[int, int, int, int, int]]:
    """Random ops on runs of consecutive rows (``more`` = 1 inside a run: the run's next row is
    the next command), 15 % the same row again."""
    rng, lanes = b.rng, b.width // 32
    hot = [rng.randrange(b.rows) for _ in range(6)]
    hot.append((PAGE // b.row_bytes - 3) % b.rows)  # a run across a 4 KiB page boundary
    cmds, row, run = [], 0, 0
    for _ in range(n):
        if cmds and rng.random() < 0.15:
            pass  # the same row again, right behind (one-beat messages to one slot)
        elif run == 0:  # a new run of consecutive rows, from one of a few hot rows: runs overlap
            row, run = rng.choice(hot), rng.randint(1, 24) - 1
        else:
            row, run = (row + 1) % b.rows, run - 1
        op = rng.choices([Op.WRITE, Op.ADD, Op.READ], [2, 6, 2])[0]
        cmds.append((int(op), row, random_row(rng, lanes), rng.getrandbits(lanes), int(run > 0)))
    return cmds


async def run_random_together(benches: tuple[Bench, ...], models: list, p: dict) -> None:
    """Random commands (``p["commands"]``, default 500) to every bench at once under random
    ``cmd`` / ``rsp`` handshakes (``p_cmd`` / ``p_rsp``, default 0.7), each against its model."""
    n = p.get("commands", 500)
    runs = [cocotb.start_soon(b.run(_random_commands(b, n), model, p_cmd=p.get("p_cmd", 0.7),
                                    p_rsp=p.get("p_rsp", 0.7)))
            for b, model in zip(benches, models, strict=True)]
    for run in runs:
        await run


def _message_commands(b: Bench, n: int) -> list[tuple[int, int, int, int, int]]:
    """The reducer's pattern: messages of ``message_beats`` consecutive rows (one chunk each,
    ``more`` = 1 but on a message's last row),
    ``contributors`` per chunk, the first WRITE and the others ADD. ``spread`` (default): the
    messages go round-robin over all the chunks the rows hold, so two messages to one chunk are
    a whole region apart and every ADD reads DRAM (contributions spread over a WAN delay: the
    worst case); otherwise a chunk's contributions are back to back and ADDs forward."""
    beats, contributors = b.p.get("message_beats", 32), b.p.get("contributors", 3)
    chunks = b.rows // beats
    lanes, all_lanes = b.width // 32, (1 << (b.width // 32)) - 1
    cmds, m = [], 0
    while len(cmds) < n:
        chunk, nth = (m % chunks, m // chunks % contributors) if b.p.get("spread", True) \
            else (m // contributors % chunks, m % contributors)
        for k in range(beats):
            data = sum((b.rng.randrange(-2**16, 2**16) & 0xFFFFFFFF) << (32 * j) for j in range(lanes))
            cmds.append((int(Op.WRITE if nth == 0 else Op.ADD), chunk * beats + k, data, all_lanes,
                         int(k < beats - 1)))
        m += 1
    return cmds[:n]


async def _check_state(b: Bench, model, on_cycle) -> None:
    """The ``DecisionState`` after the run: one ADD per job and row whose data (field 0 = 2)
    neither advances the head nor writes the pending bit, so each response's count shows the
    job's head and the row's pending bit as the model has them; ``state_error`` 0. Also checks
    the run moved heads and left pending bits of both values (the state was exercised)."""
    assert any(head != (0, 0) for head in model.heads) and 0 < sum(model.pending) < b.rows, \
        f"state not exercised: heads {model.heads}, pending {model.pending}"
    probes = [(int(Op.ADD), row, 2, 0, 0) for _ in range(b.p["jobs"]) for row in range(b.rows)]
    sides = [job for job in range(b.p["jobs"]) for _ in range(b.rows)]
    await b.run(probes, model, p_cmd=1.0, p_rsp=1.0, on_cycle=on_cycle, sides=sides)
    assert not int(b.dut.state_error.value), "DecisionState error set"


async def _watch_released(b: Bench, seen: list) -> None:
    """Every run the ``DecisionState`` releases (``released_valid``), as the twin records them:
    (job, head chunk, head slot, start, run)."""
    layout = released_layout(b.rows, b.p["jobs"])
    head = head_layout(b.rows)
    while True:
        await RisingEdge(b.dut.clk)
        await ReadOnly()
        if int(b.dut.released_valid.value):
            r = _unpack(layout, int(b.dut.released.value))
            h = _unpack(head, r["head"])
            seen.append((r["job"], h["chunk"], h["slot"], r["start"], r["run"]))


def _check_released(seen: list, model) -> None:
    """The released runs are the twin's, in order, and runs of length 0, 1 and more happened."""
    assert seen == model.released, f"released runs {seen[:8]}..., want {model.released[:8]}... " \
        f"({len(seen)} / {len(model.released)})"
    runs = {run for *_, run in seen}
    assert {0, 1} <= runs and max(runs) >= 2, f"runs not exercised: {sorted(runs)}"


@cocotb.test()
async def random_commands(dut):
    """Random commands under random backpressure and latency: every response as the reference."""
    p = tb_params()
    b = Bench(dut, p)
    model = await b.start()
    lo, hi = p.get("latency_range", (20, 200))
    on_cycle = None
    if b.ram is not None:
        b.random_axi_pauses(p.get("p_axi", 0.3))
        dut.latency.value = b.rng.randint(lo, hi)

        def on_cycle(cycle: int) -> None:
            if cycle % 300 == 0:
                dut.latency.value = b.rng.randint(lo, hi)

    cmds = _random_commands(b, p.get("commands", 500))
    released: list = []
    if p.get("jobs"):
        cocotb.start_soon(_watch_released(b, released))
    await b.run(cmds, model, p_cmd=p.get("p_cmd", 0.7), p_rsp=p.get("p_rsp", 0.7), on_cycle=on_cycle)
    if p.get("jobs"):
        await _check_state(b, model, on_cycle)
        await ClockCycles(dut.clk, 4)
        _check_released(released, model)
    if b.ram is not None:
        await ClockCycles(dut.clk, 2)
        b.check_bursts()
        if b.stride == b.row_bytes:  # dense: consecutive rows share a burst
            assert any(beats > 1 for _, _, beats in b.bursts), "no burst of more than one beat"
        assert not int(dut.mem_error.value), "mem_error set"
        await b.check_memory(model)
    if p.get("set_waits") is not None:  # "some" / "none": cycles commands waited for a set conflict
        waits = int(dut.set_waits.value)
        assert waits > 0 if p["set_waits"] == "some" else waits == 0, f"set_waits {waits}, want {p['set_waits']}"


def _long_run_commands(b: Bench, lengths: list[int]) -> list[tuple[tuple[int, int] | None, list, list[int]]]:
    """Commands and sides for ``long_runs``, in segments (window reset or None, commands, sides):
    for each length, each job toggles (ADD, data 0: no head advance) the slots behind its head
    that are not pending until ``length`` are (at most its region's window - 1), then releases
    (ADD with the release flag, at the head's row); a WRITE or READ of another job on a random row
    after every few commands. With ``regions``: every job's window is reset (a random chunk) first,
    and after each length one job's, with some of its region's bits set pending before. A scratch
    twin tracks the state while generating."""
    jobs, rng, release = b.p["jobs"], b.rng, 1 << (b.side_width - 1)
    scratch = RecordModel(b.width, lambda row: 0, jobs=jobs, slots=b.rows, release_bit=b.side_width - 1,
                          regions=b.regions)
    segments: list[tuple[tuple[int, int] | None, list, list[int]]] = [(None, [], [])]

    def add(op: int, row: int, data: int, side: int) -> None:
        scratch.apply(op, row, data, 0, side)
        segments[-1][1].append((op, row, data, 0, 0))
        segments[-1][2].append(side)

    def reset(job: int) -> None:
        chunk = rng.choice([rng.getrandbits(32), (1 << 32) - rng.randrange(1, 4)])  # some near the wrap
        scratch.reset(job, chunk)
        segments.append(((job, chunk), [], []))

    if b.regions:
        for job in range(jobs):
            reset(job)
    for length in lengths:
        for job in range(jobs):
            region = scratch.region(job)
            window = region[1] if region else b.rows
            length_j = min(length, window - 1)
            head = scratch.heads[job][1]
            for k in range(length_j):
                row = region_slot(head, 1 + k, b.rows, region)
                if not scratch.pending[row]:
                    add(int(Op.ADD), row, 0, job)  # toggle: pending
                if jobs > 1 and rng.random() < 0.2:
                    add(int(rng.choice([Op.WRITE, Op.READ])), rng.randrange(b.rows), random_row(rng, b.width // 32),
                        (job + 1) % jobs)
            stop = region_slot(head, 1 + length_j, b.rows, region)
            if length_j < window - 1 and scratch.pending[stop]:
                add(int(Op.ADD), stop, 0, job)  # toggle back: the run ends here
            add(int(Op.ADD), head, 2, job | release)
        if b.regions:  # a window reset of one job, some of its bits pending (the CLEAR clears them)
            job = rng.randrange(jobs)
            base, window = scratch.region(job)
            for row in rng.sample([region_slot(base, k, b.rows, (base, window)) for k in range(window)], 4):
                if not scratch.pending[row]:
                    add(int(Op.ADD), row, 0, job)
            reset(job)
    for row in range(0, b.rows, 3):  # leave some pending bits for the final state check
        add(int(Op.ADD), row, 0, 0)
    return segments


async def _window_reset(b: Bench, job: int, chunk: int) -> None:
    """Offer the window reset (``reset`` stream) of ``job`` to ``chunk`` until it is taken."""
    dut = b.dut
    await RisingEdge(dut.clk)
    dut.reset__payload.value = _pack(ResetLayout(b.p["jobs"]), job=job, head=chunk)
    dut.reset__valid.value = 1
    await ReadOnly()
    while not int(dut.reset__ready.value):
        await RisingEdge(dut.clk)
        await ReadOnly()
    await RisingEdge(dut.clk)  # taken at this edge
    dut.reset__valid.value = 0


@cocotb.test()
async def long_runs(dut):
    """Runs of ``run_lengths`` released at the heads of every job, under random handshakes, AXI
    pauses and latency: every response, released part and the final state as the twin's."""
    p = tb_params()
    b = Bench(dut, p)
    model = await b.start()
    lo, hi = p.get("latency_range", (20, 200))
    b.random_axi_pauses(p.get("p_axi", 0.3))
    dut.latency.value = b.rng.randint(lo, hi)

    def on_cycle(cycle: int) -> None:
        if cycle % 300 == 0:
            dut.latency.value = b.rng.randint(lo, hi)

    lengths = p["run_lengths"]
    segments = _long_run_commands(b, lengths)
    released, popped = [], []
    cocotb.start_soon(_watch_released(b, released))
    if p.get("release_depth"):
        cocotb.start_soon(_consume_release(b, popped, p.get("p_release", 0.3)))
    for reset, cmds, sides in segments:  # a window reset once the commands before it are answered
        if reset is not None:
            await _window_reset(b, *reset)
            model.reset(*reset)
        await b.run(cmds, model, p_cmd=p.get("p_cmd", 0.7), p_rsp=p.get("p_rsp", 0.7), on_cycle=on_cycle, sides=sides)
    await _check_state(b, model, on_cycle)
    await ClockCycles(dut.clk, 4)
    assert released == model.released, f"released parts {released[:8]}..., want {model.released[:8]}..."
    if b.regions:  # in a region the first scan step may see only part of a short run
        assert len(released) > len(lengths) * p["jobs"], "no run released in two parts"
    else:
        long = sum(n > 64 for n in lengths) * p["jobs"]
        assert len(released) == len(lengths) * p["jobs"] + long, "a run of more than 64 slots is two parts"
    assert not int(dut.mem_error.value), "mem_error set"
    if p.get("release_depth"):
        await ClockCycles(dut.clk, 20 * p["release_depth"])
        assert popped == [(job, start, run) for job, _, _, start, run in released], "release queue out of order"


async def _consume_release(b: Bench, popped: list, p_ready: float) -> None:
    """The release queue's consumer (an emitter stand-in): ``release.ready`` at random, every
    entry taken appended to ``popped`` as (job, start, run)."""
    layout = release_item_layout(b.rows, b.p["jobs"])
    while True:
        await RisingEdge(b.dut.clk)
        ready = b.rng.random() < p_ready
        b.dut.release__ready.value = int(ready)
        await ReadOnly()
        if ready and int(b.dut.release__valid.value):  # taken at the next edge
            r = _unpack(layout, int(b.dut.release__payload.value))
            popped.append((r["job"], r["start"], r["run"]))


@cocotb.test()
async def throughput(dut):
    """Back-to-back reducer traffic: steady-state commands per cycle (to params["out"])."""
    p = tb_params()
    b = Bench(dut, p)
    model = await b.start()
    if b.ram is not None:
        b.throttle_data(p.get("bandwidth", 1.0))
    cmds = _message_commands(b, p.get("commands", 2000))
    stamps = await b.run(cmds, model, p_cmd=1.0, p_rsp=1.0)
    q = len(stamps) // 4
    rate = steady_rate(stamps)
    read_bursts = [beats for ch, _, beats in b.bursts if ch == "ar"]
    reads = sum(read_bursts)
    writes = [beats for ch, _, beats in b.bursts if ch == "aw"]
    result = {"rate": rate, "adds": sum(op == Op.ADD for op, *_ in cmds[q:-q]) / (len(cmds) - 2 * q), "cycles": stamps[-1], "commands": len(cmds), "read_beats": reads,
              "write_beats": sum(writes), "mean_write_burst": sum(writes) / max(1, len(writes)),
              "mean_read_burst": reads / max(1, len(read_bursts))}
    if b.ram is not None and p.get("spread", True) and b.rows > 2 * p["outstanding"]:
        # Same-row commands a region apart never meet in the table: each ADD reads its row once,
        # a WRITE never reads.
        assert reads == sum(op == Op.ADD for op, *_ in cmds), f"{reads} rows read"
    if p.get("out"):
        with open(p["out"], "w") as f:
            json.dump(result, f)
    assert rate >= p.get("min_rate", 0.0), f"{rate:.3f} commands/cycle < {p.get('min_rate')}"
    shortest = min(result["mean_read_burst"], result["mean_write_burst"])
    assert shortest >= p.get("min_mean_burst", 0), \
        f"mean read / write burst {result['mean_read_burst']:.1f} / {result['mean_write_burst']:.1f} " \
        f"beats < {p.get('min_mean_burst')}"
