"""The reducer's result assembler (docs/reducer.md, "Result emission"): turns the slot store's
responses into RESULT messages on ``m_msg``.

Every response updates the slot's sticky overflow flag (one per slot: flip-flops up to
``ResultAssembler.FLAGS_IN_FLIP_FLOPS_MAX_SLOTS`` slots, above that a one-bit-wide block RAM read as the response
is accepted, so nothing in the assembler grows with S but that memory; docs/large_slots.md): a
chunk's first contribution (``write``) restarts it, any saturating lane of an ADD sets it. Responses
marked ``emit`` (rows of a result released by the contribution that completed it) or ``read``
(rows the emitter read for a queued result) are result rows. A result's OVERFLOW flag is the
sticky flag after its last row, and the framer takes the header from a message's first beat, so
results are **store-and-forward**: the rows wait in a data FIFO (block RAM, room for the
longest result) until the last one is in; then the header — from the header FIFO of its source
(``hdr_c``: pushed by the reducer when the completing contribution's last row enters the command
stream; ``hdr_e``: by the emitter), OVERFLOW added — goes into a FIFO of complete headers and
the message leaves. Responses arrive in command order, so each source's headers are used in the
order they were pushed. Responses are registered once (stage R) before any of this.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .layouts import AggHeaderLayout, message_beat_layout, message_stream
from .reducer_layouts import store_tag_layout
from .registered_fifo import RegisteredFIFO
from .skid_buffer import SkidBuffer
from .slot_store_signature import rsp_layout
from .sticky_flags import FLAGS_IN_FLIP_FLOPS_MAX_SLOTS, sticky_flags
from .unguarded_fifo import UnguardedFIFO

__all__ = ["DONE_DEPTH", "ResultAssembler"]

# complete results waiting to leave: a header is popped 3 cycles after its push when the rows'
# head is ready (each result may be one beat), + 1 pushed and + 1 accepted while rsp.ready sees
# the pop a cycle late; 5 dropped rsp.ready on back-to-back one-beat results
DONE_DEPTH = 6


class ResultAssembler(wiring.Component):
    """Slot-store responses -> RESULT messages (see the module docstring).

    ``rsp``: the store's responses (tag: :func:`store_tag_layout`). ``hdr_c``/``hdr_e``: result
    headers (RESULT, RESENT set, OVERFLOW left 0) pushed in the order their results' rows reach
    the store; neither FIFO may be pushed when full (``hdr_c_level``, ``hdr_e_room``, a flip-flop whose next
    value is ``hdr_e_room_next``). ``max_beats``: the longest result. ``copy_error``: a flip-flop
    copy (``res``, ``fin``, the ``done`` FIFO's level) is wrong (never, if the design is right).

    ``unguarded_hdr_e`` (the DRAM core): ``hdr_e`` is an ``UnguardedFIFO`` (its write never
    refused: the emitter pushes only with ``hdr_e_room``), so its write pointer counts with the
    emitter's push alone and its LUT RAM's write enable is that push: no ``level`` register whose
    next value reads ``level`` through ``w_rdy`` and the push (`assembler.level` ->
    `emitter.just_started`'s LUT -> `assembler.level`, 8.30 ns at session 46's landing seed 6).
    The read is still asked for only with ``r_rdy`` (as ``SyncFIFO`` gates it), ``level`` and
    ``r_data`` are ``SyncFIFO``'s cycle for cycle while no push meets a full FIFO, and
    ``copy_error`` also flags such a push (never). Its room (``hdr_e_room_next``) comes from
    flip-flops: a count of its own (``hdr_e_count``, counted from the push and the pop as the
    pointers are) and two flags registered from it, ``hdr_e_room2`` / ``hdr_e_room1`` (the count
    below depth - 2 / depth - 1), the push choosing between them: the same value as the pointers'
    ``level`` compare, without its subtractor and carry chain in front of the emitter's start
    flags (`assembler.hdr_e.consume` -> the level compare -> `emitter.s_ok` -> ... ->
    `emitter.sq_pn` / `sq_ok` / `i_ok` / `sr_ok`, 8.10-8.24 ns at session 47's landing seed 2);
    ``copy_error`` checks the count against ``level`` and both flags against the count.
    """

    # Up to this many slots the sticky overflow flags are flip-flops, above a block RAM of S x 1
    # bit (``sticky_flags``). Read at elaboration: tests lower it.
    FLAGS_IN_FLIP_FLOPS_MAX_SLOTS = FLAGS_IN_FLIP_FLOPS_MAX_SLOTS

    def __init__(self, data_width: int, *, slots: int, max_beats: int, hdr_c_depth: int,
                 hdr_e_depth: int = 4, header_async: bool = False, valid_next: bool = False,
                 ping_pong: bool = False, unguarded_hdr_e: bool = False) -> None:
        self.data_width, self.slots, self.max_beats = data_width, slots, max_beats
        self.unguarded_hdr_e = unguarded_hdr_e  # hdr_e as an UnguardedFIFO (class docstring)
        self.header_async = header_async
        self.ping_pong = ping_pong  # the output skid buffer as SkidBuffer(ping_pong, ready_copy)
        self.valid_next = valid_next  # output m_valid_next: m_msg.valid's next value
        self.hdr_c_depth, self.hdr_e_depth = hdr_c_depth, hdr_e_depth
        self.tag_layout = store_tag_layout(slots)
        super().__init__({
            "rsp": In(stream.Signature(rsp_layout(data_width))),
            "hdr_c": In(stream.Signature(AggHeaderLayout)),
            "hdr_e": In(stream.Signature(AggHeaderLayout)),
            "hdr_e_room": Out(1),
            "hdr_e_room_next": Out(1),
            "hdr_c_level": Out(range(hdr_c_depth + 1)),
            "m_msg": Out(message_stream(data_width)),
            "result_out": Out(1),
            "idle": Out(1),
            # a result's last row found its header FIFO empty (never: the benches check it)
            "hdr_missing": Out(1),
            # a flip-flop copy (res, fin, done_level) differs from what it stands for (never)
            "copy_error": Out(1),
            **({"m_valid_next": Out(1)} if valid_next else {}),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        W, S = self.data_width, self.slots
        # data FIFO: room for the longest result plus one more beat in flight, so a result can
        # always complete while the one before it waits for m_msg
        # (+1: rsp.ready sees a pop a cycle late)
        depth = max(4, self.max_beats + 3)
        row = data.StructLayout({"data": W, "first": 1, "last": 1})
        # its head in flip-flops (RegisteredFIFO): the block RAM's ~4 ns clock-to-output no
        # longer reaches ``last`` -> the ``done`` pop -> its level, read address and 116-bit
        # read register (the 9.2 ns group of cut 2's placements; one cycle more latency)
        m.submodules.rows = rows = RegisteredFIFO(row, depth)
        # (buffered like ``rows``: a one-beat result waits for its row as long as a longer one)
        # header_async (the DRAM core): ``done`` keeps only the timing (its valid, level and pops:
        # a 1-bit FIFO), the headers are in ``done_hdr``, an unbuffered FIFO pushed and popped with
        # it (the same entries, its head ready no later), read asynchronously from its LUT RAM at
        # the read pointer: the pop (m_msg side: ``out.s.ready``, the rows' head, ``done.r_rdy``)
        # no longer enables the 152-bit read register of ``done`` (seed 4's 9.25 ns group,
        # ``out.s__ready`` -> ... -> ``assembler.s__payload`` CE, docs/benchmarks.md session 45)
        hdr_w = AggHeaderLayout.size
        m.submodules.done = done = SyncFIFOBuffered(width=1 if self.header_async else hdr_w, depth=DONE_DEPTH)
        if self.header_async:
            m.submodules.done_hdr = done_hdr = SyncFIFO(width=hdr_w, depth=DONE_DEPTH)
        m.submodules.hdr_c = hdr_c = SyncFIFO(width=AggHeaderLayout.size, depth=self.hdr_c_depth)
        if self.unguarded_hdr_e:
            m.submodules.hdr_e = hdr_e = UnguardedFIFO(AggHeaderLayout.size, self.hdr_e_depth)
            hdr_e_full = hdr_e.level == self.hdr_e_depth
            hdr_e_rdy, hdr_e_ren = ~hdr_e_full, hdr_e.r_rdy  # (the read gated as SyncFIFO gates it)
        else:
            m.submodules.hdr_e = hdr_e = SyncFIFO(width=AggHeaderLayout.size, depth=self.hdr_e_depth)
            hdr_e_rdy, hdr_e_ren = hdr_e.w_rdy, None
        m.d.comb += [
            hdr_c.w_en.eq(self.hdr_c.valid), hdr_c.w_data.eq(self.hdr_c.payload), self.hdr_c.ready.eq(hdr_c.w_rdy),
            hdr_e.w_en.eq(self.hdr_e.valid), hdr_e.w_data.eq(self.hdr_e.payload), self.hdr_e.ready.eq(hdr_e_rdy),
            self.hdr_c_level.eq(hdr_c.level),
        ]
        # the emitter pushes a cycle after it starts a chunk: one push may be on its way. A
        # flip-flop worked out a cycle ahead (the emitter's start decision reads it), counting the
        # push that a start this cycle would make next cycle
        # (its next value is an output too: the emitter works its start flag out a cycle ahead)
        hdr_e_room = Signal()
        e_copy_error = 0
        if self.unguarded_hdr_e:  # from flip-flops: a count of its own (class docstring)
            D, e_push, e_pop = self.hdr_e_depth, self.hdr_e.valid, hdr_e.r_en
            e_level = Signal(range(D + 1), name="hdr_e_count")
            # e_level < D - 2 / < D - 1 (room after a push / without one), registered: their next
            # values compare e_level with constants, the push and the pop choosing
            e_room2, e_room1 = Signal(name="hdr_e_room2", init=D > 2), Signal(name="hdr_e_room1", init=D > 1)

            def below(cap: int):  # e_level's next value < cap
                return Mux(e_push, Mux(e_pop, e_level < cap, e_level < cap - 1),
                           Mux(e_pop, e_level < cap + 1, e_level < cap))

            m.d.sync += [e_level.eq(e_level + e_push - e_pop), e_room2.eq(below(D - 2)), e_room1.eq(below(D - 1))]
            room_next = Mux(e_push, e_room2, e_room1)  # (the same values as the pointers' compare)
            e_copy_error = ((e_level != hdr_e.level) | (e_room2 != (e_level < D - 2))
                            | (e_room1 != (e_level < D - 1)))
        else:
            room_next = hdr_e.level + self.hdr_e.valid + 1 < self.hdr_e_depth
        m.d.comb += [self.hdr_e_room.eq(hdr_e_room), self.hdr_e_room_next.eq(room_next)]
        m.d.sync += hdr_e_room.eq(self.hdr_e_room_next)

        # stage R: the response, registered; accepted only if what R may push fits. rsp.ready is
        # a flip-flop worked out a cycle ahead from the levels, this cycle's pushes and the
        # response taken now (which R pushes next cycle), without this cycle's pops (they come
        # from m_msg.ready): at worst one entry of room is seen a cycle late
        r_v = Signal()
        r = Signal(rsp_layout(W))
        rt = Signal(self.tag_layout)
        ready = Signal(init=1)
        acc = self.rsp.valid & ready
        # R pushes a result row now (res), its result's last (fin: its header into ``done``):
        # flip-flops worked out from the response as it is accepted, so the registered tag's
        # decode (rt.read/emit/last, 7 LUT inputs) is not between R and the ``done`` FIFO's write
        # enable and level (cut 6c's seed 3, 8.07 ns: docs/benchmarks.md "Cut 7"); copy_error
        # checks both against r_v and rt every cycle
        res, fin = Signal(name="res"), Signal(name="fin")
        acc_tag = Signal(self.tag_layout)
        m.d.comb += [self.rsp.ready.eq(ready), rt.eq(r.tag[: self.tag_layout.size]),
                     acc_tag.eq(self.rsp.payload.tag[: self.tag_layout.size])]
        m.d.sync += [res.eq(acc & (acc_tag.emit | acc_tag.read)),
                     fin.eq(acc & (acc_tag.emit | acc_tag.read) & acc_tag.last)]

        def fits(level, cap: int, a, b):
            """``level + a + b < cap``, with ``a``/``b`` (``acc`` arrives late: from ``ready``
            over a long route) selecting among compares of ``level`` with constants instead
            of entering an adder in front of the compare's carry chain."""
            return Mux(a & b, level < cap - 2, Mux(a | b, level < cap - 1, level < cap))

        # done_level: a flip-flop copy of done.level (SyncFIFOBuffered's: the inner FIFO's level
        # plus its output register), counted from the push and the pop as CommandArbiter.level,
        # so the room check compares a flip-flop with constants (copy_error checks it)
        done_level = Signal(range(DONE_DEPTH + 1))
        m.d.sync += done_level.eq(done_level + fin - done.r_en)
        m.d.sync += [r_v.eq(acc), ready.eq(fits(rows.level, depth, res, acc) & fits(done_level, DONE_DEPTH, fin, acc))]
        with m.If(self.rsp.ready):
            m.d.sync += r.eq(self.rsp.payload)

        # sticky overflow per slot (``sticky_flags``): the flag before this response (rt.slot's),
        # updated in stage R; in a block RAM read as the response is accepted into R (the same
        # enable as ``r``), so the flag arrives with it
        acc_slot = data.View(self.tag_layout, self.rsp.payload.tag[: self.tag_layout.size]).slot
        _, s_new = sticky_flags(m, S, in_memory=S > self.FLAGS_IN_FLIP_FLOPS_MAX_SLOTS, load=self.rsp.ready,
                                next_slot=acc_slot, slot=rt.slot, update=r_v, clear=rt.write, set_=r.overflow)

        # result rows
        mid = Signal()  # inside a result (its first row pushed, not its last)
        with m.If(res):
            m.d.sync += mid.eq(~rt.last)
        out_row = Signal(row)
        m.d.comb += [out_row.data.eq(r.data), out_row.first.eq(~mid), out_row.last.eq(rt.last),
                     rows.w_en.eq(res), rows.w_data.eq(out_row)]
        src = Signal(AggHeaderLayout)
        hdr = Signal(AggHeaderLayout)
        m.d.comb += [
            src.eq(Mux(rt.read, hdr_e.r_data, hdr_c.r_data)),
            hdr.eq(src),
            hdr.flags.eq(src.flags | s_new),  # bit 0: OVERFLOW
            hdr_e.r_en.eq(fin & rt.read if hdr_e_ren is None else fin & rt.read & hdr_e_ren),
            hdr_c.r_en.eq(fin & ~rt.read),
            self.hdr_missing.eq(fin & ~Mux(rt.read, hdr_e.r_rdy, hdr_c.r_rdy)),
            done.w_en.eq(fin),
            done.w_data.eq(0 if self.header_async else hdr),
        ]
        done_data = done.r_data
        copy_error = (res != (r_v & (rt.emit | rt.read))) | (fin != (res & rt.last)) | (done_level != done.level)
        if self.unguarded_hdr_e:  # a push into a full hdr_e (SyncFIFO would refuse it); its count
            copy_error |= (self.hdr_e.valid & hdr_e_full) | e_copy_error
        if self.header_async:
            m.d.comb += [done_hdr.w_en.eq(fin), done_hdr.w_data.eq(hdr), done_hdr.r_en.eq(done.r_en)]
            done_data = done_hdr.r_data
            # the two FIFOs hold the same entries: equal levels, and the headers' head is there
            # whenever ``done``'s is
            copy_error |= (done_hdr.level != done.level) | (done.r_rdy & ~done_hdr.r_rdy)

        # out: a result leaves once complete (its header in ``done``), through a skid buffer so
        # that m_msg's valid and payload come from flip-flops (not from the FIFOs' outputs, the
        # rows' a block RAM) and m_msg.ready reaches no FIFO. ping_pong (the DRAM core): two
        # alternately loaded slots enabled from flip-flops of their own, so m_msg.ready (the
        # egress merger's grant, off the control block's state) reaches only the read pointer and
        # the valid / ready flip-flops, not the 154 output-register enables (the Versa DRAM build's
        # ``control.fsm_state`` -> ``egress_merger.sel`` -> ``core.s_msg__0__payload``, 28
        # endpoints, 9.03 ns at main 193bd2d's seed 2; docs/benchmarks.md session 46). The same
        # beats in the same cycles (hdl/skid_buffer.py).
        m.submodules.out = out = SkidBuffer(message_beat_layout(W), ping_pong=self.ping_pong,
                                            ready_copy=self.ping_pong)
        if self.ping_pong:
            copy_error |= out.copy_error
        wiring.connect(m, out.m, wiring.flipped(self.m_msg))
        o, h = out.s, rows.m  # h: the rows' head, from flip-flops (as are done.r_rdy, o.ready)
        m.d.comb += [
            o.valid.eq(h.valid & done.r_rdy),
            o.payload.data.eq(h.payload.data),
            o.payload.first.eq(h.payload.first),
            o.payload.last.eq(h.payload.last),
            o.payload.hdr.eq(done_data),
            h.ready.eq(o.ready & done.r_rdy),
            done.r_en.eq(o.valid & o.ready & h.payload.last),
            self.result_out.eq(self.m_msg.valid & self.m_msg.ready & self.m_msg.payload.first),
            self.idle.eq(~r_v & (rows.level == 0) & ~h.valid & ~mid & ~self.m_msg.valid),
            self.copy_error.eq(copy_error),
        ]
        if self.valid_next:  # the output register's valid next cycle (SkidBuffer's SKID update)
            out_free = ~self.m_msg.valid | self.m_msg.ready
            m.d.comb += self.m_valid_next.eq(Mux(out_free, out.skid_valid | o.valid, self.m_msg.valid))
        return m
