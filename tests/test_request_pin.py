"""``RequestPin`` (hdl/request_pin.py) alone in Amaranth's simulator against the pin rule as the
harness computed it before step 3 (combinationally, from the request's header and this cycle's
state; ``ExactPin`` below): every cycle, the stage never lets out a request the exact rule
pins now (a flag one cycle old may only pin more), and on some cycles it pins one the exact
rule would let go (the stale cycles exist); requests leave in order, unchanged, and all leave
once nothing is in flight. Random requests of two jobs around their floors (behind them:
resends that lower ``low``), back to back, in order, on completion or mixed; ``quiet`` from an
in-flight count (up on each admission, down at random), emitter reads while not quiet, window
resets taken once the stage is empty and quiet. Removing the same-job hold fails it (a
request right behind one of its job that lowered the floor or started the span)."""

from __future__ import annotations

import random
from collections import deque

import pytest
from amaranth.lib import data
from stream_helpers import pack, run_testbench

from wanreduce.hdl.decision_state import region_layout
from wanreduce.hdl.reducer_layouts import RecordSide
from wanreduce.hdl.request_pin import RequestPin

M32 = 0xFFFFFFFF
SLOTS = 16
REGIONS = [(0, 3), (8, 2)]  # (base, log2 window): windows of 8 and 4
REQ = data.StructLayout({"msg": 8, "side": RecordSide})


class ExactPin:
    """The harness's pin rule before step 3: per job the emission pointer, ``low`` and the
    on-completion span, and whether a request is pinned against this cycle's state."""

    def __init__(self, heads: list[int]) -> None:
        self.emitted, self.low = list(heads), list(heads)
        self.oc_lo, self.oc_span, self.oc_any = [0] * len(heads), [0] * len(heads), [False] * len(heads)

    def terms(self, job: int, chunk: int, quiet: bool) -> dict:
        """The rule's terms of a request (job, chunk) now."""
        window = 1 << REGIONS[job][1]
        floor = self.emitted[job] if quiet else self.low[job]
        ahead = (chunk - floor) & M32
        oc_d = (chunk - self.oc_lo[job]) & M32
        oc_new = (self.oc_span[job] - oc_d) & M32 if oc_d >> 31 else max(oc_d, self.oc_span[job])
        first = quiet or not self.oc_any[job]
        return {"floor": floor, "behind": ahead >> 31, "far": not ahead >> 31 and ahead >= window,
                "oc_behind": oc_d >> 31, "oc_new": oc_new, "first": first, "wide": not first and oc_new >= window}

    def pinned(self, job: int, chunk: int, in_order: bool, quiet: bool) -> bool:
        t = self.terms(job, chunk, quiet)
        return (not quiet and t["far"]) if in_order else t["wide"]

    def step(self, quiet: bool, admitted: tuple[int, int, bool] | None, reset: tuple[int, int] | None,
             read: tuple[int, int] | None) -> None:
        """The state at the clock edge: quiet, an admission, a window reset, an emitter read."""
        t = self.terms(admitted[0], admitted[1], quiet) if admitted else None
        if quiet:
            self.low, self.oc_any = list(self.emitted), [False] * len(self.low)
        if admitted:
            job, chunk, in_order = admitted
            self.low[job] = chunk if t["behind"] else t["floor"]
            if not in_order:
                self.oc_any[job] = True
                self.oc_lo[job] = chunk if t["first"] or t["oc_behind"] else self.oc_lo[job]
                self.oc_span[job] = 0 if t["first"] else t["oc_new"]
        if reset:
            self.emitted[reset[0]] = self.low[reset[0]] = reset[1]
        if read:
            self.emitted[read[0]] = (read[1] + 1) & M32


def run_pin(seed: int, mode: str, cycles: int = 3000) -> dict:
    """Drive random traffic (``mode``: in_order, on_completion, mixed); returns the counts."""
    rng = random.Random(seed)
    dut = RequestPin(REQ, slots=SLOTS, jobs=len(REGIONS))
    rl = region_layout(SLOTS)
    heads = [rng.choice([0, M32 - 3, rng.getrandbits(32)]) for _ in REGIONS]
    ref = ExactPin(heads)
    counts = {"admitted": 0, "more": 0, "pinned": 0, "exact": 0, "resets": 0}

    async def tb(ctx) -> None:
        ctx.set(dut.region.as_value(), sum(pack(rl, {"base": b, "log2_window": lw}) << (j * rl.size)
                                         for j, (b, lw) in enumerate(REGIONS)))
        for j, h in enumerate(heads):  # the pointers start at each job's head, as after a reset
            ctx.set(dut.reset.as_value(), pack(dut.reset.shape(), {"job": j, "head": h}))
            ctx.set(dut.reset_fire, 1)
            await ctx.tick()
        ctx.set(dut.reset_fire, 0)
        inflight, stopping, sent, waiting = 0, 0, 0, deque()
        offer = None
        for cycle in range(cycles + 400):
            draining = cycle >= cycles
            quiet = inflight == 0
            ctx.set(dut.quiet, quiet)
            if offer is None and not draining and rng.random() < 0.8:
                job = rng.randrange(len(REGIONS))
                in_order = {"in_order": True, "on_completion": False}.get(mode, rng.random() < 0.5)
                chunk = (ref.emitted[job] + rng.randint(-10, 12)) & M32
                offer = (job, chunk, in_order, sent & 0xFF)
                ctx.set(dut.req.payload.as_value(), pack(REQ, {"msg": offer[3], "side": {
                    "hdr": {"job_id": job, "chunk": chunk}, "cfg": {"in_order": int(in_order)}}}))
            ctx.set(dut.req.valid, offer is not None)
            if not stopping and not draining and rng.random() < 0.004:
                stopping = 1
            reset = None
            if stopping and ctx.get(dut.empty) and quiet:
                reset = (rng.randrange(len(REGIONS)), rng.choice([ref.emitted[0] + rng.randint(-3, 20), rng.getrandbits(32)]) & M32)
            ctx.set(dut.stop, bool(stopping))
            ctx.set(dut.reset_fire, reset is not None)
            if reset:
                ctx.set(dut.reset.as_value(), pack(dut.reset.shape(), {"job": reset[0], "head": reset[1]}))
            read = None
            if not quiet and rng.random() < 0.2:
                job = rng.randrange(len(REGIONS))
                read = (job, (ref.low[job] + rng.randint(0, 4)) & M32)
            ctx.set(dut.read_done, read is not None)
            if read:
                ctx.set(dut.read_job, read[0])
                ctx.set(dut.read_next, (read[1] + 1) & M32)  # the chunk after the one read
            ctx.set(dut.out.ready, rng.random() < 0.85)
            # this cycle: the exact rule on the request at the stage's output
            valid, pinned = ctx.get(dut.out.valid), ctx.get(dut.pinned)
            load = offer is not None and ctx.get(dut.req.ready)
            assert not (stopping and ctx.get(dut.req.ready)), "a request taken while a reset waits"
            admitted = None
            if valid or pinned:
                job, chunk, in_order, msg = waiting[0]
                exact = ref.pinned(job, chunk, in_order, quiet)
                assert not (valid and exact), f"cycle {cycle}: job {job} chunk {chunk:#x} let out, the exact rule pins it"
                got = ctx.get(dut.out.payload)
                assert (got.msg, got.side.hdr.chunk) == (msg, chunk), "requests out of order or changed"
                counts["more"] += pinned and not exact
                counts["pinned"] += pinned
                counts["exact"] += exact
                if valid and ctx.get(dut.out.ready):
                    admitted = (job, chunk, in_order)
                    waiting.popleft()
                    counts["admitted"] += 1
            if load:
                waiting.append(offer)
                offer, sent = None, sent + 1
            ref.step(quiet, admitted, reset, read)
            if reset:
                stopping, counts["resets"] = 0, counts["resets"] + 1
            inflight += (admitted is not None) - (inflight > 0 and rng.random() < 0.3)
            await ctx.tick()
        assert not waiting, f"{len(waiting)} requests still in the stage with nothing in flight"
        assert ctx.get(dut.pin_waits) == counts["pinned"], "pin_waits counts the cycles a request waits"

    run_testbench(dut, tb)
    return counts


@pytest.mark.parametrize(("mode", "seed"), [("in_order", 1), ("on_completion", 2), ("mixed", 3)])
def test_request_pin_stale_flag_only_pins_more(mode: str, seed: int) -> None:
    """Never a request out that the exact rule pins now; some cycles pin more (the stale ones);
    the exact rule pins often (the traffic reaches it); resets happen."""
    c = run_pin(seed, mode)
    assert c["exact"] > 50 and c["more"] > 20 and c["admitted"] > 500 and c["resets"] > 3, c
