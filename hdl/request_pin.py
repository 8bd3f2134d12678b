"""The record path's pin as a registered stage in front of the request (issue 16; docs/large_slots.md,
"The core wiring", step 3): ``DecisionOnRecords``' pin comparisons (``chunk - floor``,
``chunk - oc_lo`` per job) no longer sit between the request's header and its handshake.

The rule (the harness's, hdl/decision_record_harness.py's docstring, "Order"), per job: in order,
a request waits while something is in flight (``quiet`` low) if its chunk is a window or more
past the floor (the emission pointer ``emitted`` when quiet, else ``low``: that pointer at the
last quiet cycle lowered by every request of the job admitted since); on completion, if it would
widen the span of chunks admitted since the last quiet cycle (``oc_lo``, ``oc_span``,
``oc_any``) to a window or more.

**The stage.** One register holds the request (``r``) and ``r_pin``, its pin flag computed a
cycle before, for the request that will be in the register then (the one taken now, or the one
held), against the state of that cycle: so ``out.valid`` is ``r_valid & ~r_pin``, of flip-flops
only (``r_pin`` is the choice, by ``r_load``, of the offered request's flag and the held one's,
each registered: the handshake reaches no compare, round 6). A request admitted updates the state from the exact terms of that cycle (``cur``: its
chunk against the floor of the cycle, as before), so the state is the old rule's.

**Why one cycle old is safe** (tests/test_request_pin.py checks each cycle that the stage never
admits a request the exact rule would pin, and that it pins more on some cycles). Between the
cycle t the flag is computed and t + 1 it is used, with no request of the same job admitted at t:

- in order: ``low`` at t + 1 is the floor at t (a quiet cycle copies ``emitted`` into it, and
  only an admission of the job lowers it), so where t + 1 is not quiet the comparison is the
  exact one; the flag needs ``~quiet`` at t + 1, and it takes ``~(quiet & ~admitted)`` at t:
  from a quiet cycle with no admission nothing can get in flight (the emitter is idle with its
  queue empty, the sweep only runs while requests are stopped; the probe's READs change nothing
  and are not counted in ``quiet``), so t + 1 is quiet too. Where t + 1 becomes quiet the exact
  rule admits and the stale flag may still pin: one cycle more, never less;
- on completion: ``oc_lo`` / ``oc_span`` do not change, ``oc_any`` only clears (at quiet), so
  the exact span test at t + 1 is the one at t or admits.
- **same job back to back (the hold)**: a request of job j admitted at t lowers ``low[j]`` (a
  resend behind the floor) or starts / widens j's span; the flag computed at t did not see it.
  So a request of the job admitted at t is held one cycle (``r_pin`` set), and its flag is
  recomputed against the updated state. Cost: one cycle per back-to-back pair of one job's
  requests (a request per message, a message is one beat or more: only one-beat messages of
  one job lose a cycle each). A bypass (the next request compared against the admitted one's
  updated floor and span) would keep the cycle but puts the admitted request's comparison in
  front of the next one's: the path this stage removes.

A window reset: the stage takes no request while ``stop`` (the reset waiting) is high, and the
owner passes the reset on only once the stage is ``empty`` (its request was taken before the
reset, so it is decided before it); then it sets the job's ``emitted`` and ``low`` to the new
head (``reset_fire``). ``pin_waits`` counts the cycles a request waits in the stage for its pin
(the hold included).
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Array, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .decision_state import CHUNK_BITS, region_layout
from .layouts import ResetLayout
from .reducer_config import select_job_entry

__all__ = ["RequestPin"]


class RequestPin(wiring.Component):
    """The pin as a registered stage: ``req`` -> ``out`` (module docstring). ``req_layout``: a
    layout with ``side.hdr`` (``AggHeaderLayout``: ``job_id``, ``chunk``) and ``side.cfg.in_order``
    (``RecordSide``); ``slots`` S and ``jobs`` J for the regions' windows.

    In: ``req``, ``quiet`` (nothing in flight), ``stop`` (take nothing: a window reset waits),
    ``region`` (per job), ``reset`` / ``reset_fire`` (a window reset taken), ``read_done`` /
    ``read_job`` / ``read_next`` (the emitter's last READ of a chunk; its chunk + 1). Out: ``out``, ``pinned``
    (the request waits for its pin), ``empty``, ``pin_waits``."""

    def __init__(self, req_layout: data.Layout, *, slots: int, jobs: int) -> None:
        self.req_layout, self.jobs = req_layout, jobs
        self.job_bits = (jobs - 1).bit_length()
        super().__init__({
            "req": In(stream.Signature(req_layout)), "out": Out(stream.Signature(req_layout)),
            "quiet": In(1), "stop": In(1),
            "region": In(data.ArrayLayout(region_layout(slots), jobs)),
            "reset": In(ResetLayout(jobs)), "reset_fire": In(1),
            "read_done": In(1), "read_job": In(range(jobs)), "read_next": In(CHUNK_BITS),
            "pinned": Out(1), "empty": Out(1), "pin_waits": Out(32),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        jobs, jb = self.jobs, self.job_bits
        emitted = Array(Signal(CHUNK_BITS, name=f"emitted{j}") for j in range(jobs))
        low = Array(Signal(CHUNK_BITS, name=f"low{j}") for j in range(jobs))
        oc_lo = Array(Signal(CHUNK_BITS, name=f"oc_lo{j}") for j in range(jobs))
        oc_span = Array(Signal(CHUNK_BITS, name=f"oc_span{j}") for j in range(jobs))
        oc_any = Array(Signal(name=f"oc_any{j}") for j in range(jobs))

        def terms(p: data.View, name: str) -> SimpleNamespace:
            """Request ``p``'s pin terms against this cycle's state (the old rule's, one place)."""
            hdr = p.side.hdr
            job = hdr.job_id[:jb]
            floor = Mux(self.quiet, emitted[job], low[job])
            ahead = (hdr.chunk - floor)[:CHUNK_BITS]
            window = Const(1, CHUNK_BITS + 1) << select_job_entry(m, self.region, jobs, job, f"{name}_region").log2_window
            oc_d = (hdr.chunk - oc_lo[job])[:CHUNK_BITS]
            oc_behind = oc_d[-1]
            oc_new = Mux(oc_behind, (oc_span[job] - oc_d)[:CHUNK_BITS], Mux(oc_d > oc_span[job], oc_d, oc_span[job]))
            oc_first = self.quiet | ~oc_any[job]
            return SimpleNamespace(job=job, chunk=hdr.chunk, floor=floor, behind=ahead[-1],
                                   far=~ahead[-1] & (ahead >= window), on_completion=~p.side.cfg.in_order,
                                   oc_behind=oc_behind, oc_new=oc_new, oc_first=oc_first,
                                   wide=~oc_first & (oc_new >= window))

        r, r_valid, r_pin = Signal(self.req_layout, name="r"), Signal(name="r_valid"), Signal(name="r_pin")
        r_pin_off, r_pin_cur, r_load = Signal(name="r_pin_off"), Signal(name="r_pin_cur"), Signal(name="r_load")
        fire = self.out.valid & self.out.ready
        load = self.req.valid & self.req.ready
        m.d.comb += [self.req.ready.eq(~self.stop & (~r_valid | fire)),
                     self.out.valid.eq(r_valid & ~r_pin), self.out.payload.eq(r),
                     self.pinned.eq(r_valid & r_pin), self.empty.eq(~r_valid)]
        with m.If(load):
            m.d.sync += r.eq(self.req.payload)
        m.d.sync += r_valid.eq(load | (r_valid & ~fire))
        # the next request's flag against this cycle's state, for the request in the register
        # next cycle: the one offered (``load``) or the one held, both flagged and the flag
        # chosen (``load`` reaches only that choice, not the comparisons); ``calm``: quiet now
        # and nothing admitted, so quiet next cycle; the hold: the request admitted now is of
        # its job
        cur, offered = terms(r, "cur"), terms(self.req.payload, "next")
        calm = self.quiet & ~fire

        def flag(nx: SimpleNamespace) -> Value:
            return Mux(nx.on_completion, nx.wide, ~calm & nx.far) | (fire & (cur.job == nx.job))

        # each flag in its own flip-flop and the choice after them (round 6): a choice before the
        # flip-flop lets synthesis share the two requests' compares (yosys ``opt_share``: one
        # compare of operands chosen by ``load``), so the handshake went through them
        m.d.sync += [r_pin_off.eq(flag(offered)), r_pin_cur.eq(flag(cur)), r_load.eq(load)]
        m.d.comb += r_pin.eq(Mux(r_load, r_pin_off, r_pin_cur))
        with m.If(self.pinned):
            m.d.sync += self.pin_waits.eq(self.pin_waits + 1)
        # the state: a quiet cycle restarts ``low`` and the spans, an admission updates its job
        # from its exact terms, a window reset sets the job's pointers, the emitter moves them
        with m.If(self.quiet):
            m.d.sync += [low[j].eq(emitted[j]) for j in range(jobs)] + [a.eq(0) for a in oc_any]
        with m.If(fire):
            m.d.sync += low[cur.job].eq(Mux(cur.behind, cur.chunk, cur.floor))
            with m.If(cur.on_completion):
                m.d.sync += [oc_any[cur.job].eq(1), oc_lo[cur.job].eq(Mux(cur.oc_first | cur.oc_behind, cur.chunk,
                                                                          oc_lo[cur.job])),
                             oc_span[cur.job].eq(Mux(cur.oc_first, 0, cur.oc_new))]
        with m.If(self.reset_fire):
            m.d.sync += [emitted[self.reset.job].eq(self.reset.head), low[self.reset.job].eq(self.reset.head)]
        with m.If(self.read_done):
            m.d.sync += emitted[self.read_job].eq(self.read_next)
        return m
