"""The record path's result emitter (issue 16, large S step 4; docs/large_slots.md, "The record
store"): released runs in, result rows out, each chunk's header read back from its record in
DRAM and its sums from the slot store.

Three stages, each a stream, in release order throughout:

1. **Record READs** (``rec_read``: a slot): a run from ``RecordReleaseQueue`` (``run``: job,
   ``1 + run`` chunks from the slot ``start``, the slots following in the job's region, as
   ``slot_of`` places chunks) is expanded into one record READ per slot, each slot queued
   (``slots``) for stage 2. The owner turns ``rec_read`` into the record engine's READ command.
2. **Data READs** (``data_cmd``: the slot store's READ commands): the records come back in order
   (``rec_data``, ``record_layout``); each is taken with its slot once the header queue has room
   and the chunk before has its last READ out (the cycle after it: ``rec_data.ready`` does not
   wait for ``data_cmd.ready``), its tag queued (``hdrs``), and its ``nbm1 + 1`` rows read (row
   = slot's row + beat, ``more`` but on the last, ``tag`` = the ``read_tag`` parameter so the
   owner tells these responses apart). ``read_done`` / ``read_job`` / ``read_next`` pulse with a
   chunk's last READ (``read_next``: its chunk + 1, the owner's new emission pointer for the
   job: a later chunk may reuse the slot after it; each ``+ 1`` made before the choice of chunk).
3. **Rows** (``row``: the header from the record's tag, ``hdl/result_emitter.py``'s
   ``result_header``, OVERFLOW from the response's ``overflow``: the owner's sticky flag for the
   slot, as it stands at that response; RESENT for a resend's run, ``resent``: its flag rides
   with the slot and the header; the row's ``data``; ``last``): each READ's response
   (``data_rsp``, in order) with the oldest queued header; ``data_rsp.ready`` is ``row.ready``,
   so a held output holds the store's responses.

**Own rows** (docs/large_slots.md, "Results from the completing contribution's own ADD
responses"): a run whose ``own`` is set has its first chunk's rows from its completing
contribution's own store responses (``own_rsp``: the store split's ``own``, in decision order),
not read: they wait in the own FIFO (``own_rows`` R rows of W + 1 bits, at least a slot's
``2**row_bits``; ``own_taken`` pulses as stage 3 takes one, for the owner's reservation).
Stage 2 queues such a chunk's header with ``own`` and issues no READ (``read_done`` at its take,
``data_final`` only with a chunk's last data READ); stage 3 takes its rows from the own FIFO,
the others' from ``data_rsp``, as the header says. Headers are in release order and own rows in
decision order, which for own chunks is the same.

**Prefetch, and what is in flight at most**: stage 1 runs ahead of stage 2 by up to the slot
queue (``prefetch`` + 2 entries: a ``RegisteredFIFO``): a record READ is issued only while the
queue has room, and an entry leaves it only when its record is taken, so at most
``prefetch + 2`` record READs are outstanding (issued, record not yet taken) while an earlier
chunk's data READs go out and its rows leave. Stage 2 takes a record only while the header queue
(``headers`` + 2 entries) has room, and a header leaves with its chunk's last row, so at most
``headers + 2`` chunks have data READs issued and rows not yet out (at most that many times
``2**row_bits`` rows). Both bounds are queue depths, so nothing grows with the run's length.

**Order, the owner's part** (not this component's): a record READ must reach the record engine
before any later command that rewrites the slot, and a data READ the slot store after the
completing contribution's last command and before a later chunk's first one; the owner holds
its own commands (``read_done`` tells it a slot's rows are read, or for an own chunk taken:
its rows are responses to commands before any later one) and ``data_cmd`` accordingly.
``idle``: nothing taken and not yet out (the owner's drain check, e.g. before a window reset).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from wanreduce import wire

from .decision_state import region_layout
from .layouts import AggHeaderLayout, lanes
from .params import check_core_params, check_large_slots
from .record_release_queue import release_item_layout
from .reducer_config import select_job_entry, slot_of
from .reducer_layouts import bits_for, record_layout, slot_tag_layout
from .registered_fifo import RegisteredFIFO
from .result_emitter import result_header
from .slot_store_signature import TAG_BITS, Op, cmd_layout
from .store_read_split import read_rsp_layout

__all__ = ["RecordEmitter", "result_row_layout"]


def result_row_layout(data_width: int) -> data.StructLayout:
    """A result row: the RESULT header (``AggHeaderLayout``), one beat of sums, ``last``."""
    return data.StructLayout({"hdr": AggHeaderLayout, "data": data_width, "last": 1})


class RecordEmitter(wiring.Component):
    """Released runs -> record READs -> data READs -> result rows (module docstring).

    Parameters: ``data_width`` W, ``slots`` S, ``jobs`` J, ``row_bits`` (a slot's rows:
    ``2**row_bits``), ``prefetch`` / ``headers`` (the two queues' depths), ``read_tag`` (the
    data READs' tag), ``own_rows`` (the own FIFO's rows R: at least ``2**row_bits``). Ports:
    ``run``, ``region``, ``rec_read``, ``rec_data``, ``data_cmd``, ``data_rsp``, ``own_rsp``,
    ``row``, ``read_done`` / ``read_job`` / ``read_next``, ``data_final``, ``own_taken``,
    ``idle``.
    """

    def __init__(self, data_width: int, *, slots: int, jobs: int, row_bits: int, prefetch: int = 4,
                 headers: int = 4, read_tag: int = 0, own_rows: int | None = None) -> None:
        check_large_slots(slots)
        check_core_params(jobs=jobs, row_bits=row_bits)
        for name, v in (("prefetch", prefetch), ("headers", headers)):
            if not 1 <= v <= 512:
                raise ValueError(f"{name} must be 1..512, got {v}")
        if not 0 <= read_tag < 1 << TAG_BITS:
            raise ValueError(f"read_tag must be 0..{(1 << TAG_BITS) - 1}, got {read_tag}")
        own_rows = 1 << row_bits if own_rows is None else own_rows
        if not isinstance(own_rows, int) or not 1 << row_bits <= own_rows <= 4096:
            raise ValueError(f"own_rows must be {1 << row_bits}..4096 (a slot's rows at least), got {own_rows!r}")
        self.own_rows = own_rows
        self.data_width, self.slots, self.jobs, self.row_bits = data_width, slots, jobs, row_bits
        self.prefetch, self.headers, self.read_tag = prefetch, headers, read_tag
        self.slot_bits = (slots - 1).bit_length()
        self.record_layout = record_layout(jobs)
        self.cmd_layout = cmd_layout(data_width, self.slot_bits + row_bits)
        super().__init__({
            "run": In(stream.Signature(release_item_layout(slots, jobs))),
            "region": In(data.ArrayLayout(region_layout(slots), jobs)),
            "rec_read": Out(stream.Signature(self.slot_bits)),
            "rec_data": In(stream.Signature(self.record_layout)),
            "data_cmd": Out(stream.Signature(self.cmd_layout)),
            "data_rsp": In(stream.Signature(read_rsp_layout(data_width))),
            "own_rsp": In(stream.Signature(read_rsp_layout(data_width))),
            "row": Out(stream.Signature(result_row_layout(data_width))),
            "read_done": Out(1), "read_job": Out(bits_for(jobs)), "read_next": Out(32),
            "data_final": Out(1), "own_taken": Out(1), "idle": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sb, rb = self.slot_bits, self.row_bits
        tag_layout = slot_tag_layout(self.jobs)
        queued = data.StructLayout({"slot": sb, "resent": 1, "own": 1})
        m.submodules.slots = slots = RegisteredFIFO(queued, self.prefetch)
        m.submodules.hdrs = hdrs = RegisteredFIFO(data.StructLayout({"tag": tag_layout, "resent": 1, "own": 1}),
                                                  self.headers)
        rsp_layout = read_rsp_layout(self.data_width)
        m.submodules.owns = owns = SyncFIFOBuffered(width=rsp_layout.size, depth=self.own_rows)
        m.d.comb += [owns.w_data.eq(self.own_rsp.payload), owns.w_en.eq(self.own_rsp.valid),
                     self.own_rsp.ready.eq(owns.w_rdy)]

        # ---- 1: a run -> a record READ per slot, the slots queued ----
        run = self.run
        busy, job, slot, left = Signal(), Signal(run.payload.job.shape()), Signal(sb), Signal(sb)
        resent = Signal()  # the run is a resend's chunk: its row gets RESENT
        own = Signal()  # the next slot is the run's first and its rows are the completer's own
        region = select_job_entry(m, self.region, self.jobs, job, "region")
        rr = self.rec_read
        m.d.comb += [run.ready.eq(~busy), rr.valid.eq(busy & slots.w_rdy), rr.payload.eq(slot),
                     slots.w_data.eq(Cat(slot, resent, own)), slots.w_en.eq(rr.valid & rr.ready)]
        with m.If(run.valid & run.ready):
            m.d.sync += [busy.eq(1), job.eq(run.payload.job), slot.eq(run.payload.start), left.eq(run.payload.run),
                         resent.eq(run.payload.resent), own.eq(run.payload.own)]
        with m.If(rr.valid & rr.ready):
            m.d.sync += own.eq(0)
            # the next chunk's slot in the job's region (slot_of of its offset from the base)
            m.d.sync += [slot.eq(slot_of(region, slot - region.base + 1, sb)), left.eq(left - 1)]
            with m.If(left == 0):
                m.d.sync += busy.eq(0)

        # ---- 2: a record (with its slot) -> its tag queued, its rows read ----
        rd, dc = self.rec_data, self.data_cmd
        reading, r_slot, beat, nbm1 = Signal(), Signal(sb), Signal(max(1, rb)), Signal(max(1, rb))
        r_job, r_next = Signal.like(self.read_job), Signal(32)
        tag = rd.payload.tag
        last = beat == nbm1 if rb else 1
        # a record is taken once the chunk before has its last READ out (the cycle after it, so
        # ``data_cmd.ready`` reaches no ``take``: round 5, docs/large_slots.md), so ``read_done``
        # pulses once per chunk
        own_next = slots.m.payload.own
        take = rd.valid & slots.m.valid & hdrs.w_rdy & ~reading
        m.d.comb += [rd.ready.eq(take), slots.m.ready.eq(take), hdrs.w_data.tag.eq(tag),
                     hdrs.w_data.resent.eq(slots.m.payload.resent), hdrs.w_data.own.eq(own_next), hdrs.w_en.eq(take)]
        c = dc.payload
        m.d.comb += [dc.valid.eq(reading), c.op.eq(Op.READ), c.lanes.eq((1 << lanes(self.data_width)) - 1),
                     c.tag.eq(self.read_tag), c.more.eq(~last),
                     c.row.eq(Cat(beat[:rb], r_slot))]
        fire = dc.valid & dc.ready
        with m.If(fire):
            m.d.sync += beat.eq(beat + 1)
            with m.If(last):
                m.d.sync += reading.eq(0)
        with m.If(take & ~own_next):
            m.d.sync += [reading.eq(1), r_slot.eq(slots.m.payload.slot), beat.eq(0), nbm1.eq(tag.nbm1),
                         r_job.eq(tag.job), r_next.eq(tag.chunk + 1)]
        took_own = take & own_next
        m.d.comb += [self.data_final.eq(fire & last), self.read_done.eq((fire & last) | took_own),
                     self.read_job.eq(Mux(took_own, tag.job, r_job)),
                     self.read_next.eq(Mux(took_own, (tag.chunk + 1)[:32], r_next))]

        # ---- 3: each row (a READ's response, or the own FIFO's for an own chunk) with the oldest
        # header -> a row ----
        ds, row, h, from_own = self.data_rsp, self.row, hdrs.m.payload.tag, hdrs.m.payload.own
        src = Signal(rsp_layout)
        m.d.comb += src.eq(Mux(from_own, owns.r_data, ds.payload))
        out_beat = Signal(max(1, rb))
        flags = Mux(src.overflow, wire.Flags.OVERFLOW, 0) | Mux(hdrs.m.payload.resent, wire.Flags.RESENT, 0)
        out_last = out_beat == h.nbm1[:rb] if rb else 1
        m.d.comb += [row.valid.eq(hdrs.m.valid & Mux(from_own, owns.r_rdy, ds.valid)),
                     ds.ready.eq(row.ready & hdrs.m.valid & ~from_own),
                     owns.r_en.eq(row.ready & hdrs.m.valid & from_own), self.own_taken.eq(owns.r_en & owns.r_rdy),
                     *result_header(row.payload.hdr, h, flags),
                     row.payload.data.eq(src.data), row.payload.last.eq(out_last),
                     hdrs.m.ready.eq(row.valid & row.ready & out_last)]
        with m.If(row.valid & row.ready):
            m.d.sync += out_beat.eq(out_beat + 1)
            with m.If(out_last):
                m.d.sync += out_beat.eq(0)
        m.d.comb += self.idle.eq(~busy & ~slots.m.valid & (slots.level == 0) & ~reading & ~hdrs.m.valid
                                 & (hdrs.level == 0) & ~owns.r_rdy)
        return m
