"""The decision's late operand: each job's head and each slot's pending bit, as the record store's
modify needs them at C2 (issue 16, large-S step 4; docs/large_slots.md, "The record store", and
``hdl/dram_rmw_engine.py``, "Late operand").

The record store's decision needs, besides the record and the message header (``side``), the
job's *head* (the oldest chunk not yet released, and its slot) and the slot's *pending* bit.
Both change with every decision, so they are read when the command reaches C2, not when it is
accepted. ``DecisionState`` holds them and serves the engine's late-operand ports:

- **Read a cycle ahead.** With the engine's look-ahead (``ahead_valid``, the job and the slot of
  the command in C1) the head is read from a memory of J heads and the pending bit from
  ``PendingWords``' one-bit read port (the pending bits' one store, 64-bit words in block RAM,
  ``hdl/pending_words.py``); in the next cycle they are ``late``, the command in C2.
- **Written from the effect, a cycle late.** The modify's ``effect`` (a new head for the job, a
  new value of the slot's pending bit, each with its write enable) is registered (``fx``: the
  modify ends in flip-flops), then written: the head into its memory, the pending bit as a
  ``PendingWords`` SET (1) or a one-slot CLEAR (0; both take one cycle and never drop
  ``op.ready``), which writes its word in the cycle after (its data cycle).
- **Bypass.** The command in C2 in t + 1 read its state in t, before the effect of the command
  in C2 in t was written: ``late`` takes that effect from ``fx`` where it is the same job's head
  or the same slot's pending bit. The head memory's read port is transparent to its write, so
  one step suffices for the head; the pending bit is written a cycle later still, so it also
  takes ``fx2`` (the effect before, pending part only). The newest effect wins.

- **The release run at the head.** A command that may complete its job's head chunk (a
  *release candidate*: ``c0_release`` / ``ahead_release``, from its side) needs ``late.run``, the
  pending slots right behind the head, and the head then advances by 1 + run. The run is
  **peeked from C0**: ``PendingWords``' PEEK from the head's slot (read with C0's job a cycle
  before, on a second read port of the heads; only if C0 held a command then, ``c0_was``: an
  empty C0's job is no value, X in Icarus) is issued while the candidate waits in C0, once
  nothing is in flight (``quiet``: no command in C1 or C2, no effect being written, no release
  going on), once per candidate (``peeked``); what its first step saw is registered in the
  PEEK's data cycle (``pk_seen``, ``pk_done``), and the first part and whether the run is long
  are taken from those at the candidate's C2, so no scan result reaches C2's modify
  combinationally (the record path's Fmax, docs/benchmarks.md). The candidate may leave C0 in the PEEK's cycle: nothing else fires
  before it (C0 is in order) and nothing is written meanwhile, so the run stays current. A
  PEEK cannot see the effects of the commands ahead (not yet written) and would contend with
  their writes for ``PendingWords``' one operation port, so the candidate is **held in C0**
  (``hold``, the engine's ``c0_hold``) until they are written: no bypass into a scan
  result. The candidate's effect (``release``, ``run``, the new head) is written as a RELEASE
  from the old head's slot (the run cleared in its data cycle; its run checked against the
  peeked one) and bypassed into the pending bit of the next two commands (a slot among the
  run's reads 0), as the one-slot effects are; the head as before. It also goes out as
  ``released`` (job, new head, start = the old head's slot, run: 1 + run chunks released)
  with ``released_valid``, for the owner's release queue.
- **Cost of the choice.** Commands that are not candidates are never held for the candidate
  itself, so commands to other jobs keep one per cycle unless they queue behind a held
  candidate (C0 is in order): a candidate costs 0 to 3 cycles (3 behind back-to-back commands
  with effects; 2 before the PEEK moved to C0, when its run came combinationally into C2).
  The alternative, a hold on C0 for every command while a release is in progress, stops the
  commands of every job behind each at-head completion until its run is written.
- **Runs longer than one step** (``RUN_STEP`` = 64 slots, the pending word): the candidate's
  ``late.run`` (the *first part*) is the run if its PEEK found it in the first scan step, else
  as far as that step saw it (``PendingWords``' ``reach``: at least 65 slots on the whole ring of
  S >= 128, so there a run up to 64 is always whole; in a region the step may see only a few
  slots, see ``first_step_reach`` in sim/record_model.py), and at most ``RUN_STEP``. A longer
  run is released in two parts. The candidate's effect releases the first part at once (the
  head advances by 1 + first part; ``released`` puts that part out), and its RELEASE, from the old head's slot as for any run,
  goes on in the background, one cycle per further 128 slots, clearing the whole run; when it
  ends its run gives the final head (old + 1 + run, written into the heads' memory) and a second
  ``released`` (start = the first part's head, the rest of the run). While it goes on
  (``busy``) **every** command waits in C0, not only the job's: ``PendingWords``' one operation
  port is the scan's (another job's SET or CLEAR could not be written; C2 cannot wait), and the
  job's head is exact only at the end. Since C0 learns whether a run is long only at the
  candidate's C2 (``pk_long``, too late for the command right behind it), every
  command also waits while a candidate is in C1 or C2. **Cost** (measured in Amaranth's
  simulator, docs/large_slots.md): a command right behind a release at the head waits 2 cycles
  (a release costs a back-to-back stream of commands with effects 5 cycles with the candidate's
  own wait; 4 while the run came combinationally into C2), and a run over
  64 slots 3 to 10 more (65: 3, 128-200: 4, 300: 6, 511: 10 at S 512: the PEEK's further steps,
  then the RELEASE's, 128 slots a cycle each). Releases
  come at most once per chunk's last contribution (>= 125 rows of data per chunk at E = 499,
  W = 64), so neither is visible in the data rate but for one-beat messages. Holding C0 also
  until the PEEK's scan ends would cost every release one cycle more; the candidate need not
  wait for it, its C2 comes after the data cycle.
  Without ``regions`` every job's region is the whole ring (base 0, its chunks in all S
  slots); with ``regions=True`` each job has the reducer's region (``base``, ``log2_window``)
  and the window reset's ``reset`` stream CLEARs it (the class docstring; the records
  themselves are freed by ``hdl/free_sweep.py``).

- **The scan in three stages** (``scan_stages=3``, the default; 1: the timing above, the RTL of
  session 28): ``PendingWords``' scan answers in its S2, three cycles after it is taken, and
  ``op.ready`` is low in its R and S1 (docs/large_slots.md, "The record path's next cut"). So the
  PEEK's answer is registered three cycles on (``pk_d``), and the candidate leaves C0 two cycles
  after its PEEK, not with it (its C2 reads ``pk_seen`` then); the commands behind a RELEASE are
  held through its R and S1 and a cycle more (``fx.release``, ``rel_d1``, ``rel_d2``: their
  pending-bit reads, as they leave C0, come at its S2 or later, when the bit port sees its
  clears; no bypass of the run's range), and a PEEK waits
  for them too (``rel_d1`` / ``rel_d2`` in ``quiet``: no operation while the scan cannot take
  one); a short RELEASE's run is checked at its S2 (``rel_d3``, the wanted run kept from ``fx``).
  SETs and one-slot CLEARs keep their one cycle. The pending bit is read a cycle earlier than
  the head (the record path's Fmax): from C0's slot (``c0_slot``, the engine's ``c0_row``) as
  the command fires (``PendingWords``' ``bit_stage``: the word's bank and low offset bits
  registered at C1, the bit chosen at C2), its bypass from ``fx`` / ``fx2`` chosen at C1 from
  flip-flops and registered (``byp`` / ``byv``), at C2 from ``fx`` by ``same_slot`` (compared at
  C1), so no read port or slot compare is in front of C2's modify (round 6). Cost
  (measured, tests/test_decision_state.py): a release in a back-to-back stream of commands with
  effects holds C0 10 cycles instead of 5; each further scan step of a long run 3 cycles, not 1.
  Every new flip-flop resets to 0, and none gates a valid before it is written.

``error`` (sticky): an effect came without a look-ahead the cycle before, or a look-ahead
without its effect (the engine's contract broken), ``PendingWords`` refused an operation, a
RELEASE found another run than the PEEK, or a long run's RELEASE found ``RUN_STEP`` slots or
fewer.
"""

from __future__ import annotations

from collections.abc import Callable

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .dram_rmw_engine import DramRmwEngine
from .layouts import ResetLayout
from .params import check_core_params, check_large_slots
from .pending_words import PendingOp, PendingWords
from .record_release_queue import RecordReleaseQueue
from .reducer_config import select_job_entry, slot_of

__all__ = ["CHUNK_BITS", "RUN_STEP", "DecisionState", "connect_owner", "effect_layout", "head_layout", "late_layout",
           "region_layout", "released_layout", "run_step"]

CHUNK_BITS = 32  # the reducer's chunk ids (its heads are 32-bit chunk ids)
RUN_STEP = 64  # the most slots a candidate's ``late.run`` releases at once (a longer run: two parts)


def run_step(slots: int) -> int:
    """The first part of a release's run: ``RUN_STEP``, or S - 1 on a smaller ring (a run is at
    most S - 1 slots, so it is never long there)."""
    return min(RUN_STEP, slots - 1)


def head_layout(slots: int) -> data.StructLayout:
    """A job's head: its ``chunk`` id and the ``slot`` that chunk is in."""
    return data.StructLayout({"chunk": CHUNK_BITS, "slot": (slots - 1).bit_length()})


def late_layout(slots: int) -> data.StructLayout:
    """The late operand: the command's job's ``head``, its slot's ``pending`` bit and, for a
    release candidate, ``run`` (the pending slots right behind the head), current at C2; and
    ``heads``: the two chunks ``head`` is chosen from (``fx``, the effect's head written last
    cycle, if ``fwd``; else ``rd``, the heads' memory's read), so a modify may compare its
    chunk with both and choose the results (``head``'s choice not in front of its compares)."""
    sb = (slots - 1).bit_length()
    heads = data.StructLayout({"fwd": 1, "fx": CHUNK_BITS, "rd": CHUNK_BITS})
    return data.StructLayout({"head": head_layout(slots), "pending": 1, "run": sb, "heads": heads})


def effect_layout(slots: int) -> data.StructLayout:
    """A decision's effect: the job's new ``head`` (if ``head_we``), the slot's new ``pending`` bit
    (if ``pending_we``), and ``release``: the head's chunk completed, the ``run`` of pending
    slots behind it released (cleared; the new head then is the old one + 1 + ``run``);
    ``resend``: a resend of the command's slot, queued (``release_depth``) in decision order;
    ``complete``: on-completion release, the command's chunk completed (its slot queued the same
    way, without ``resent``; no head or pending change)."""
    sb = (slots - 1).bit_length()
    return data.StructLayout({"head_we": 1, "head": head_layout(slots), "pending_we": 1, "pending": 1,
                              "release": 1, "run": sb, "resend": 1, "complete": 1})


def region_layout(slots: int) -> data.StructLayout:
    """A job's region of the S slots: ``2**log2_window`` slots from ``base`` (wrapping at S), the
    log2 window clamped to log2 S by the owner (as the reducer's configuration does)."""
    sb = (slots - 1).bit_length()
    return data.StructLayout({"base": sb, "log2_window": range(sb + 1)})


def released_layout(slots: int, jobs: int) -> data.StructLayout:
    """A released run for the owner's release queue: the ``job``, its new ``head``, and the
    chunks released: ``1 + run`` slots from ``start`` (the old head's slot), wrapping at S."""
    sb = (slots - 1).bit_length()
    return data.StructLayout({"job": (jobs - 1).bit_length(), "head": head_layout(slots),
                              "start": sb, "run": sb})


class DecisionState(wiring.Component):
    """J heads and S pending bits served as the engine's late operand (module docstring).

    In: ``c0_valid`` / ``c0_job`` / ``c0_slot`` / ``c0_release`` (the command in the engine's C0;
    its slot: read from with three scan stages; the last: it may release at its job's head), ``ahead_valid`` / ``ahead_job`` / ``ahead_slot`` /
    ``ahead_release`` (the engine's look-ahead), ``effect`` / ``effect_valid``. Out: ``hold``
    (for the engine's ``c0_hold``), ``late`` (for the command in C2), ``released`` /
    ``released_valid`` (a run released at a head, for a release queue), ``error``; ``settled``: no
    command in C1 / C2, no effect being written, no release (or a long run's rest) in progress
    (what a window reset waits for; an owner's drain check too).
    ``pending``: the ``PendingWords`` (for tests and inspection), ``heads``: the heads' memory;
    ``head`` (out): each job's head chunk, a flip-flop copy written with ``heads`` (J x 32 bits, the
    reducer's ``head``: the next chunk to release, in order; the last reset's on completion).

    ``release_depth`` (default None: none, the ports and RTL as before): the released runs also
    go into a ``RecordReleaseQueue`` of that depth (``queue``), out as the stream ``release``
    (job, start, run) for the emitter; while it has no room for one more release, release
    candidates wait in C0 (``hold``); its ``error`` is ``error``'s too. A resend's effect
    (``resend``) queues its slot (job, start = slot, run 0, ``resent``) the same way, and so does
    an on-completion completion's (``complete``, without ``resent``): the owner makes such
    commands release candidates too, so they wait for ``room`` like one.

    ``regions`` (default False: every job's region is the whole ring, the ports and RTL as
    before): the inputs ``region`` (per job, ``region_layout``: the reducer's job regions) and
    the stream ``reset`` (``ResetLayout``: the reducer's window reset, job and new head chunk).
    Each job's scans run in its region (wrapping at its end); a reset waits until no command is
    in C1, C2 or being written and no release is in progress, holds **every** command in C0
    (the CLEAR takes ``PendingWords``' one operation port, one cycle per word of the region),
    CLEARs the region's pending words, sets the job's head to the new chunk and its slot in the
    region, and is taken (``reset.ready``) in that cycle. Releases already queued stay queued.
    A head written from an effect takes its slot from its chunk (``slot_of`` in the job's
    region, as the reducer's heads are; the effect's ``head.slot`` is not used), so a modify
    need not know the regions.

    ``scan_stages``: ``PendingWords``' (module docstring, "The scan in three stages").
    """

    def __init__(self, *, slots: int, jobs: int, release_depth: int | None = None, regions: bool = False,
                 scan_stages: int = 5) -> None:
        check_large_slots(slots)
        check_core_params(jobs=jobs)
        if scan_stages not in (1, 3, 5):
            raise ValueError(f"DecisionState: scan_stages must be 1, 3 or 5, got {scan_stages}")
        self.slots, self.jobs, self.regions, self.scan_stages = slots, jobs, regions, scan_stages
        self.slot_bits = (slots - 1).bit_length()
        self.job_bits = (jobs - 1).bit_length()
        self.late_layout, self.effect_layout = late_layout(slots), effect_layout(slots)
        self.released_layout = released_layout(slots, jobs)
        self.queue = None if release_depth is None else RecordReleaseQueue(slots=slots, jobs=jobs, depth=release_depth)
        release = {} if self.queue is None else {"release": Out(stream.Signature(self.queue.item_layout))}
        super().__init__({
            "c0_valid": In(1), "c0_job": In(self.job_bits), "c0_slot": In(self.slot_bits), "c0_release": In(1),
            "hold": Out(1),
            "ahead_valid": In(1), "ahead_job": In(self.job_bits), "ahead_slot": In(self.slot_bits),
            "ahead_release": In(1),
            "late": Out(self.late_layout),
            "effect": In(self.effect_layout), "effect_valid": In(1),
            "released": Out(self.released_layout), "released_valid": Out(1),
            "error": Out(1), "settled": Out(1), "head": Out(data.ArrayLayout(CHUNK_BITS, jobs)), **release,
            **({"region": In(data.ArrayLayout(region_layout(slots), jobs)),
                "reset": In(stream.Signature(ResetLayout(jobs)))} if regions else {}),
        })
        self.pending = PendingWords(slots=slots, bit_ports=1, scan_stages=scan_stages, bit_stage=scan_stages >= 3)
        self.heads = Memory(shape=head_layout(slots), depth=jobs, init=[])

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sb = self.slot_bits
        m.submodules.pending = pw = self.pending
        m.submodules.heads = self.heads
        h_wr = self.heads.write_port()
        h_rd = self.heads.read_port(transparent_for=(h_wr,))
        h_c0 = self.heads.read_port(transparent_for=(h_wr,))  # C0's job: the peek's start a cycle on

        def region_of(job: Value, name: str) -> Value:
            """The job's region: its ``region`` input, or the whole ring."""
            if self.regions:
                return select_job_entry(m, self.region, self.jobs, job, name)
            whole = Signal(region_layout(self.slots), name=name)
            m.d.comb += [whole.base.eq(0), whole.log2_window.eq(sb)]
            return whole

        # ---- C0: a release candidate waits until C1 and C2 are empty (their effects written);
        # every command waits while a candidate is in C1 or C2 (its run may be long) and while a
        # long run's RELEASE goes on (``busy``) ----
        c2_valid, c2_job, c2_slot, c2_rel = Signal(), Signal(self.job_bits), Signal(sb), Signal()
        busy = Signal()
        room = 1  # the release queue can take one more release
        if self.queue is not None:
            m.submodules.queue = rq_ = self.queue
            room = rq_.room
            wiring.connect(m, rq_.m, wiring.flipped(self.release))
            m.d.comb += [rq_.push.eq(self.released_valid), rq_.item.job.eq(self.released.job),
                         rq_.item.start.eq(self.released.start), rq_.item.run.eq(self.released.run)]
        three = self.scan_stages >= 3
        lat = self.scan_stages  # a RELEASE's or PEEK's answer this many cycles after it is taken
        resetting = self.reset.valid if self.regions else Const(0, 1)  # a window reset waits: every command holds
        # C0's job a cycle ago and whether C0 held a command then: ``h_c0.data`` is C0's head now
        # only if both (without a command C0's job is not valid: X from an empty FIFO in Icarus)
        c0_job_r, c0_was = Signal(self.job_bits), Signal()
        m.d.comb += h_c0.addr.eq(self.c0_job)
        m.d.sync += [c0_job_r.eq(self.c0_job), c0_was.eq(self.c0_valid)]

        # ---- look-ahead (the command in C1): read its job's head and its slot's pending bit;
        # a release candidate's PEEK from its head (the head read from C0 a cycle ago) ----
        # (three stages: the pending bit's read from C0's slot, a cycle earlier still; see ``late``)
        m.d.comb += [h_rd.addr.eq(self.ahead_job), pw.rd_slot[0].eq(self.c0_slot if three else self.ahead_slot)]
        m.d.sync += [c2_valid.eq(self.ahead_valid), c2_job.eq(self.ahead_job), c2_slot.eq(self.ahead_slot),
                     c2_rel.eq(self.ahead_valid & self.ahead_release)]

        # ---- the effect, registered (fx), then written ----
        fx = Signal(self.effect_layout)
        fx_job, fx_slot, fx_start = Signal(self.job_bits), Signal(sb), Signal(sb)
        fx2 = Signal(self.effect_layout)  # the effect before (pending part only is used)
        fx2_slot = Signal(sb)
        m.d.sync += [fx.eq(Mux(self.effect_valid, self.effect.as_value(), 0)), fx_job.eq(c2_job),
                     fx_slot.eq(c2_slot), fx_start.eq(self.late.head.slot),
                     fx2.eq(fx), fx2_slot.eq(fx_slot)]
        if self.regions:  # the new head's slot: its chunk's in the job's region (the modify's not used)
            c2_region = region_of(c2_job, "c2_region")
            m.d.sync += fx.head.slot.eq(Mux(self.effect_valid, slot_of(c2_region, self.effect.head.chunk, sb), 0))
        # a long run's end (``fin``: its RELEASE done last cycle, ``fin_run`` slots in all): the
        # final head, the first part's head (``part``, from the candidate's effect) + the rest
        step = run_step(self.slots)
        part, part_job = Signal(head_layout(self.slots)), Signal(self.job_bits)
        fin, fin_run, part_run = Signal(), Signal(sb), Signal(sb)
        rq, rq_slot, rel_on = Signal(), Signal(sb), Signal()  # a long run's RELEASE: waiting, on
        rest = (fin_run - part_run)[:sb]
        final = Signal(head_layout(self.slots))
        part_region = region_of(part_job, "part_region")
        m.d.comb += [final.chunk.eq(part.chunk + rest),
                     final.slot.eq(slot_of(part_region, (part.slot - part_region.base + rest)[:sb], sb))]
        with m.If(fx.release):
            m.d.sync += [part.eq(fx.head), part_job.eq(fx_job), part_run.eq(fx.run)]
        m.d.sync += [fin.eq(rel_on & pw.done), fin_run.eq(pw.run)]
        with m.If(pw.done):
            m.d.sync += rel_on.eq(0)
        with m.If(fin):
            m.d.sync += busy.eq(0)
        # ---- the window reset: once nothing is in flight, CLEAR the region, then the new head ----
        clearing, reset_done = Signal(), Signal()
        # three stages: a RELEASE taken from ``fx`` at t is in its R at t + 1, S1 at t + 2 (``rel_d``,
        # reset 0), written and answered at t + 3 (``rel_d[2]``); nothing may use PendingWords before
        # (five: P1, P2 at t + 1, t + 2, answered at t + 5): ``rel_d[lat - 1]`` the answer's cycle
        rel_d = [Signal(name=f"rel_d{k + 1}") for k in range(lat)] if three else []
        if three:
            m.d.sync += [rel_d[0].eq(fx.release), *[rel_d[k + 1].eq(rel_d[k]) for k in range(lat - 1)]]
        rel_wait = [*rel_d[:lat - 1]]  # the RELEASE's cycles before its answer (no operation taken)
        busy_any = (self.ahead_valid | c2_valid | fx.head_we | fx.pending_we | fx.release | fx.resend | fx.complete | rq | busy
                    | rel_on | fin)
        quiet = ~(busy_any | Cat(*rel_wait).any()) if three else ~busy_any
        m.d.comb += self.settled.eq(quiet)
        if self.regions:
            reset_want = self.reset.valid & ~clearing & quiet
            reset_go = reset_want & pw.op.ready
            new_head = Signal(head_layout(self.slots))
            reset_region = region_of(self.reset.payload.job, "reset_region")
            m.d.comb += [reset_done.eq(clearing & pw.op.ready), self.reset.ready.eq(reset_done),
                         new_head.chunk.eq(self.reset.payload.head),
                         new_head.slot.eq(slot_of(reset_region, self.reset.payload.head, sb))]
            with m.If(reset_go):
                m.d.sync += clearing.eq(1)
            with m.If(reset_done):
                m.d.sync += clearing.eq(0)
        # ---- C0: a release candidate's PEEK, issued while it is in C0 once nothing is in flight
        # (``quiet``: no command in C1 or C2, no effect being written), at most once (``peeked``),
        # from the head read for C0's job a cycle ago (``c0_was``: C0 held a command then);
        # what its first step saw is registered in the PEEK's data cycle (``pk_seen``, ``pk_done``),
        # its first part and whether the run is long taken from those at the candidate's C2:
        # no scan in C2's cycle ----
        peek, peeked, peek_data = Signal(), Signal(), Signal()
        pk_seen, pk_done = Signal(sb), Signal()
        if three:  # the PEEK's answer 3 cycles on (S2): the candidate leaves C0 2 cycles on, its C2 after it
            pk_d = [Signal(name=f"pk_d{k + 1}") for k in range(lat - 1)]
            m.d.sync += [pk_d[0].eq(peek), *[pk_d[k + 1].eq(pk_d[k]) for k in range(lat - 2)], peek_data.eq(pk_d[-1])]
            cand_go = peeked & ~Cat(*pk_d[:lat - 2]).any()  # leaves C0 lat - 1 cycles after the PEEK
            # the commands behind a RELEASE wait through its R and S1 and one cycle more: their
            # pending-bit reads (from C0, as they leave it) must come at its S2 or later, when the
            # bit port sees its clears
            after_rel = fx.release | Cat(*rel_wait).any()
        else:  # the answer in the PEEK's data cycle: the candidate may leave C0 with its PEEK
            m.d.sync += peek_data.eq(peek)
            cand_go, after_rel = peek | peeked, None
        wait = (self.c0_release & ~cand_go) | (self.ahead_valid & self.ahead_release) | c2_rel | busy | resetting
        m.d.comb += [peek.eq(self.c0_valid & self.c0_release & ~peeked & quiet & room & ~resetting
                             & c0_was & (c0_job_r == self.c0_job)),
                     self.hold.eq(self.c0_valid & ((wait | after_rel) if three else wait))]
        with m.If(peek):
            m.d.sync += peeked.eq(1)
        with m.If((self.ahead_valid & self.ahead_release) | (reset_go if self.regions else 0)):
            m.d.sync += peeked.eq(0)  # the candidate left C0, or a reset changed what it peeked
        m.d.comb += [h_wr.addr.eq(Mux(fin, part_job, fx_job)), h_wr.data.eq(Mux(fin, final, fx.head)),
                     h_wr.en.eq(fx.head_we | fin)]
        if self.regions:
            with m.If(reset_done):  # nothing else writes then
                m.d.comb += [h_wr.addr.eq(self.reset.payload.job), h_wr.data.eq(new_head), h_wr.en.eq(1)]
        # ``head``: a flip-flop copy of each job's head chunk, written with the heads' memory (every
        # effect's head, a long run's final head, every window reset): the owner's JOBj_HEAD
        for j in range(self.jobs):
            with m.If(h_wr.en & (h_wr.addr == j)):
                m.d.sync += self.head[j].eq(h_wr.data.chunk)
        op = pw.op.payload  # each scan in its job's region (the whole ring without ``regions``)
        # the run cleared: a short one in the data cycle (one scan step); a long one's RELEASE
        # waits (``rq``) while its PEEK still scans, then goes on in the background (``rel_on``)
        rel_req = fx.release | rq
        rel_region, peek_region = region_of(Mux(rq, part_job, fx_job), "rel_region"), region_of(self.c0_job, "peek_region")
        with m.If(rel_req):
            m.d.comb += [pw.op.valid.eq(1), op.kind.eq(PendingOp.RELEASE), op.slot.eq(Mux(rq, rq_slot, fx_start)),
                         op.base.eq(rel_region.base), op.log2_window.eq(rel_region.log2_window)]
            m.d.sync += [rq.eq(~pw.op.ready), rq_slot.eq(Mux(rq, rq_slot, fx_start))]
            with m.If(pw.op.ready & busy):
                m.d.sync += rel_on.eq(1)
        with m.Elif(fx.pending_we):  # SET, or CLEAR of a one-slot region: one cycle each
            m.d.comb += [pw.op.valid.eq(1), op.kind.eq(Mux(fx.pending, PendingOp.SET, PendingOp.CLEAR)),
                         op.slot.eq(fx_slot), op.base.eq(fx_slot), op.log2_window.eq(0)]
        if self.regions:
            # never with anything else: nothing in flight. The operation is chosen without
            # ``op.ready`` (from the scan's last step) and without ``quiet`` (a waiting reset:
            # no PEEK), only its valid waits for them: neither reaches PendingWords' addresses
            # through this multiplexer
            with m.Elif(resetting):
                m.d.comb += [pw.op.valid.eq(reset_want & pw.op.ready), op.kind.eq(PendingOp.CLEAR),
                             op.slot.eq(reset_region.base), op.base.eq(reset_region.base),
                             op.log2_window.eq(reset_region.log2_window)]
        with m.Else():  # a PEEK, never with an effect to write (C0 held the candidate for that); chosen
            # without ``peek`` (``quiet``, C0's valid), only the valid is ``peek``
            m.d.comb += [pw.op.valid.eq(peek), op.kind.eq(PendingOp.PEEK), op.slot.eq(h_c0.data.slot),
                         op.base.eq(peek_region.base), op.log2_window.eq(peek_region.log2_window)]
        m.d.comb += [self.released_valid.eq(fx.release | (fin & (rest != 0))),
                     self.released.job.eq(Mux(fin, part_job, fx_job)), self.released.head.eq(Mux(fin, final, fx.head)),
                     self.released.start.eq(Mux(fin, part.slot, fx_start)),
                     self.released.run.eq(Mux(fin, rest - 1, fx.run))]
        if self.queue is not None:  # a release's first part is own (a long run's second, ``fin``, not)
            m.d.comb += rq_.item.own.eq(~fin)
        if self.queue is not None:  # a resend or an on-completion completion: its slot queued as a
            with m.If(fx.resend | fx.complete):  # one-chunk run (never with a release)
                m.d.comb += [rq_.push.eq(1), rq_.item.job.eq(fx_job), rq_.item.start.eq(fx_slot), rq_.item.run.eq(0),
                             rq_.item.resent.eq(fx.resend), rq_.item.own.eq(fx.complete)]

        # ---- late (the command in C2): the state read, bypassed from the effects not yet in it;
        # a release's are never needed: the commands behind a candidate wait until it is written ----
        def bit_after(e: Value, slot: Value, at: Value, older: Value) -> Value:
            """Slot ``at``'s pending bit after effect ``e`` (on ``slot``)."""
            return Mux(e.pending_we & (slot == at), e.pending, older)

        # the compares of ``fx``'s job and slot with C2's, made a cycle early from C1's (``fx_job`` /
        # ``fx_slot`` are taken from C2's every cycle, C2's from C1's): no compare in front of C2's
        # modify (round 6)
        same_job, same_slot = Signal(), Signal()
        m.d.sync += [same_job.eq(c2_job == self.ahead_job), same_slot.eq(c2_slot == self.ahead_slot)]
        head_fwd = fx.head_we & same_job
        if three:  # the bit read from C0 (issued as the command fires; ``PendingWords``' bit port
            # answers in two cycles, ``bit_stage``), the effects that read missed but ``fx`` /
            # ``fx2`` hold at C1 chosen at C1 and registered (``byp`` / ``byv``), at C2 bypassed
            # from ``fx`` (``same_slot``): the bank's read reaches no compare and no flip-flop past
            # one level of logic, no read port or slot compare is in front of C2's modify (round 6)
            at = self.ahead_slot
            hit1, hit2 = fx.pending_we & (fx_slot == at), fx2.pending_we & (fx2_slot == at)
            byp, byv = Signal(), Signal()  # reset 0
            m.d.sync += [byp.eq(hit1 | hit2), byv.eq(Mux(hit1, fx.pending, fx2.pending))]
            c2_pend = Signal()  # 0 without a command in C2 (never an X from an empty C0's slot)
            m.d.comb += c2_pend.eq(c2_valid & Mux(byp, byv, pw.rd_bit[0]))
            pending = Mux(fx.pending_we & same_slot, fx.pending, c2_pend)
        else:  # read from C1, bypassed at C2 from ``fx`` and ``fx2``
            pending = bit_after(fx, fx_slot, c2_slot, bit_after(fx2, fx2_slot, c2_slot, pw.rd_bit[0]))
        with m.If(peek_data):  # the run, or as far as the first step saw it
            m.d.sync += [pk_seen.eq(Mux(pw.done, pw.run, pw.reach)), pk_done.eq(pw.done)]
        over = pk_seen > step
        pk_long = ~pk_done | over  # two parts: the first step did not end the run, or it is > step
        m.d.comb += [self.late.head.eq(Mux(head_fwd, fx.head, h_rd.data)),
                     self.late.heads.fwd.eq(head_fwd), self.late.heads.fx.eq(fx.head.chunk),
                     self.late.heads.rd.eq(h_rd.data.chunk),
                     self.late.pending.eq(pending),
                     self.late.run.eq(Mux(c2_rel, Mux(over, step, pk_seen), 0))]
        with m.If(c2_rel & pk_long):  # the rest of the run in the background: every command waits
            m.d.sync += busy.eq(1)

        # the engine's contract, a short release's run the peek's, a long one's longer than its
        # first part (checked a cycle after the RELEASE's data cycle, from registers: the scan's
        # run is the record path's longest), PendingWords never refusing
        chk_short, chk_long, chk_done = Signal(), Signal(), Signal()
        chk_run, chk_want, chk_part = Signal(sb), Signal(sb), Signal(sb)
        m.d.sync += [chk_short.eq(fx2.release & ~busy), chk_long.eq(rel_on), chk_done.eq(pw.done),
                     chk_run.eq(pw.run), chk_want.eq(fx2.run), chk_part.eq(part_run)]
        if three:  # a short RELEASE (taken from ``fx``: nothing else uses PendingWords then) answers in its S2
            rel_want = Signal(sb)  # the run it must find, the peeked one
            with m.If(fx.release):
                m.d.sync += rel_want.eq(fx.run)
            m.d.sync += [chk_short.eq(rel_d[lat - 1] & ~busy), chk_want.eq(rel_want)]
        bad_run = (chk_short & (~chk_done | (chk_run != chk_want))) | (chk_long & chk_done & (chk_run < chk_part))
        q_error = 0 if self.queue is None else self.queue.error
        with m.If((self.effect_valid != c2_valid) | (pw.op.valid & ~pw.op.ready & ~rel_req) | bad_run | q_error):
            m.d.sync += self.error.eq(1)
        return m


def connect_owner(m: Module, engine: DramRmwEngine, state: DecisionState,
                  job_of: Callable[[Value], Value] | None = None,
                  release_of: Callable[[Value], Value] | None = None) -> None:
    """Wire ``state`` to ``engine``'s late-operand ports (``LATE_PORTS``): the look-ahead's row
    is the slot, ``job_of(side)`` the job (default: the side's field ``job``), ``release_of(side)``
    whether the command may complete at its job's head (default: never; such a command is held in
    C0 until C1 and C2 are empty, and its run peeked)."""
    if engine.rows != state.slots:
        raise ValueError(f"connect_owner: the engine's rows must be the state's slots ({state.slots}), got {engine.rows}")
    for name, want, got in (("late_shape", state.late_layout, engine.late_shape),
                            ("effect_shape", state.effect_layout, engine.effect_shape)):
        if got != want:
            raise ValueError(f"connect_owner: the engine's {name} must be {want}, got {got}")
    if state.job_bits and engine.side_shape is None:
        raise ValueError(f"connect_owner: {state.jobs} jobs need the engine's side_shape (the job rides in the side)")
    if release_of is not None and engine.side_shape is None:
        raise ValueError("connect_owner: release_of needs the engine's side_shape (the flag rides in the side)")
    job = job_of or (lambda side: side.job)
    rel = release_of or (lambda side: 0)
    sides = (engine.c0_side, engine.ahead_side) if engine.side_shape is not None else (None, None)
    jobs = [job(side) if state.job_bits else 0 for side in sides]
    rels = [rel(side) if release_of is not None else 0 for side in sides]
    m.d.comb += [state.c0_valid.eq(engine.c0_valid), state.c0_job.eq(jobs[0]), state.c0_slot.eq(engine.c0_row),
                 state.c0_release.eq(rels[0]),
                 engine.c0_hold.eq(state.hold),
                 state.ahead_valid.eq(engine.ahead_valid), state.ahead_slot.eq(engine.ahead_row),
                 state.ahead_job.eq(jobs[1]), state.ahead_release.eq(rels[1]), engine.late.eq(state.late),
                 state.effect.eq(engine.effect), state.effect_valid.eq(engine.effect_valid)]
