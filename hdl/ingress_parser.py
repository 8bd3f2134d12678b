"""Ingress parser: Ethernet/IPv4/UDP/aggregation-header checks, store-and-forward, drop reasons.

One per port. Frames (AXI4-Stream, no FCS, byte 0 in ``tdata[7:0]``, ``tuser`` = frame error)
come in; well-formed messages (payload beats with the parsed aggregation header, ``first`` and
``last``) go out. Every frame is either passed on whole or dropped whole with exactly one
:class:`wanreduce.model.Drop` reason: the first failing check in enum order, bit-exact with
:func:`wanreduce.model.parse_frame`. A dropped frame never reaches the reducer, so the reducer is
never half-applied: the parser is **store-and-forward**.

Structure
---------
Write side (one beat per cycle):

- the 64-byte header (``header_beats(W)`` beats) is captured into a 512-bit register, never
  stored; a one-cycle ``hdr_done`` pulse follows its last beat (the slot of the beat being
  waited for takes ``tdata`` every cycle, so ``tready`` does not gate 512 flip-flops);
- payload beats are written into a block-RAM packet FIFO (``lib.memory.Memory``, W bits x
  ``fifo_depth``) at ``wr_ptr``; at most ``payload_beats(max_elements, W)`` beats per frame
  are written (a longer frame is certainly dropped; the rest of it is consumed, not stored);
- at the ``tlast`` transfer the frame's facts are registered (stage **E**): tuser seen, truncated
  (ended inside the header), whether a payload was written, start pointer, and ``e_ok``: the
  frame ended in its payload, without tuser, at the beat index and with the ``tkeep`` that
  ``element_count`` asks for (the payload-length check as one flip-flop, so no compare sits
  between the verdict and ``wr_ptr``). The index of the last payload beat and its ``tkeep`` are
  registered from the header's last beat as it arrives (``element_count`` is in that beat at
  every W), so they are ready for a payload that ends in the very next cycle.

Header pipeline: stage **H1** (the cycle after ``hdr_done``) evaluates the field checks from the
header register and registers them with the aggregation-header fields. The IPv4 checksum is good when the 20-bit sum of
the ten header words folds to 0xFFFF, i.e. is one of 0xFFFF * k, k = 1..10: at W <= 128 the
IPv4 words arrive before the header's last beat, so their sum is computed early (an adder tree in
two register stages at W = 64) and H1 registers the "good" bit; at W >= 256 H1 registers the sum
and the compare is part of the verdict (no carry chain in the verdict cycle either way).

Verdict (**resolve**): in the first cycle where E is valid and, if the frame had a complete
header, H1 holds that header: the reason is the first failing check in ``Drop`` order. Accept:
the descriptor (header + beat count) is pushed into a small descriptor FIFO the next cycle, from
registers (stage **V**); the payload stays.
Drop: ``wr_ptr`` rolls back to the frame's start. For any frame with a payload the verdict comes
the cycle after ``tlast`` (the header was complete at least one beat before), so the next frame's
first payload beat, at least ``1 + header_beats`` cycles after ``tlast``, never waits for it:
back-to-back frames flow without idle cycles. (A frame that ends exactly at its 64th byte waits
one more cycle for H1; such frames are always dropped, and the parser then stalls one cycle.)

Read side: the memory's synchronous read port is the output register. When ``m_msg`` is empty
or being drained, the next beat is read: the current message's next beat, or, at a message
boundary, the first beat of the next descriptor. So one beat per cycle with any backpressure and
no bubble between messages. Reads only touch committed entries and writes only free ones (the
room check uses the registered read pointer), so the non-transparent read port needs no bypass.

Timing: a frame's tlast transfer in cycle t -> verdict in t+1 -> descriptor pushed in t+2 ->
readable in t+3 -> first ``m_msg`` beat valid in cycle **t+4** (when the output is idle). Event
strobes: ``frame_in`` in t+1, ``accept``/``drop`` in t+2.

``s_axis.tready`` is low only when a payload beat that would be stored finds the FIFO full,
when the descriptor FIFO is nearly full (checked a cycle early, from a register, with two
entries of margin), or in the 64-byte-frame corner above.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from wanreduce import wire
from wanreduce.model import Drop

from .axis import AXIStreamSignature
from .layouts import (
    HEADER_BITS,
    AggHeaderLayout,
    frame_field,
    header_beats,
    lanes,
    message_stream,
    payload_beats,
)
from .params import check_data_width
from .unguarded_fifo import UnguardedFIFO

__all__ = ["IngressParser", "DESC_DEPTH", "dram_cuts"]

DESC_DEPTH = 16  # descriptor FIFO entries (LUT RAM); messages buffered when the output stalls
_IP_WORDS = wire.IPV4_HEADER_BYTES // 2  # 10 big-endian 16-bit words in the checksum


def dram_cuts(on: bool) -> dict[str, bool]:
    """The parser's timing cuts, all on or all off: the DRAM core turns them on
    (``slot_memory="dram"``, the Versa DRAM build's paths); the on-chip core's parsers keep them
    off (its RTL pinned by tests/test_default_rtl.py). Keyword arguments of ``IngressParser``."""
    return {"registered_more": on, "registered_desc": on, "split_compares": on, "lazy_head": on,
            "registered_one": on, "direct_pay_flags": on, "early_lengths": on, "free_head": on,
            "room_count": on}


class IngressParser(wiring.Component):
    """Parse and check frames of one port; emit well-formed messages, drop the rest with a reason.

    Parameters:
      - ``data_width``: W, a power of two from 64 to 512 bits;
      - ``max_elements``: largest element count this instance supports (1..MAX_ELEMENTS_JUMBO);
        sizes the per-frame write cap and the default FIFO;
      - ``fifo_depth``: payload FIFO entries (W-bit beats), a power of two holding at least one
        maximum-size message; default: two maximum-size messages rounded up to a power of two;
      - ``accept_control``: also accept CONTROL messages (the host-facing port);
      - ``registered_more``: "beats of the current message left to read" (``rd_left != 0``) a
        flip-flop worked out with ``rd_left`` (``rd_more``), so the descriptor FIFO's read
        enable reads no compare of ``rd_left`` (the Versa DRAM build's core path,
        ``rd_left`` -> ``desc_fifo.consume``, docs/benchmarks.md session 38; off by default:
        the on-chip core's RTL unchanged);
      - ``registered_desc``: the descriptor FIFO's head and ready from flip-flops
        (``UnguardedFIFO(registered_head=True)``), so the read side's enables (the output
        registers' ``advance & (rd_more | r_rdy)``) start from flip-flops, not from the FIFO's
        pointer compare (the Versa DRAM build's core path ``desc_fifo.produce`` ->
        ``s_msg__payload``'s enable, 10.82 ns at session 40's seed 3; the same cycles; off by
        default);
      - ``split_compares``: the address compares against ``local_mac`` / ``local_ip`` registered
        a byte at a time (``eth_dst_eq0``.., ANDed into H1), so ``tdata`` reaches each flip-flop
        through a 16-input compare instead of a 96-input one (``s_axis__tdata`` ->
        ``eth_dst_eq``, 8.95 ns at the same seed; the same cycles; off by default);
      - ``lazy_head`` (with ``registered_desc``): no wide register's next value is picked by the
        output's ready: the descriptor FIFO with ``UnguardedFIFO(lazy_head=True)`` and the output
        header likewise (``hdr_o`` holds it; ``took``, the read enable a cycle late, picks the
        FIFO's ``r_last``, the descriptor just read), so ``m_msg.ready`` -> ``advance`` ->
        ``r_en`` reaches a few flip-flops, not the 100+-bit head's and output header's selects
        and enables (``demux.data_skid.s__ready`` -> ``desc_fifo.head``, 11.87 ns at session 42's
        seed 5); the same values cycle for cycle; off by default;
      - ``registered_one`` (with ``registered_desc``): the descriptor FIFO's "one entry" flag a
        flip-flop (``UnguardedFIFO(registered_one=True)``; with ``lazy_head`` it alone picks
        ``nxt``'s bypass), so no pointer compare and no push reaches the ~150 ``nxt`` (or
        ``head``) multiplexers' select: ``desc_fifo.consume_n`` -> ``produce == consume_n`` ->
        ``w_en & one`` -> ``desc_fifo.nxt``, 9.90 ns at session 42's landing seed 1
        (docs/benchmarks.md session 43); the same values cycle for cycle; off by default;
      - ``direct_pay_flags``: ``stores_r`` / ``first_r`` / ``e_wrote``'s next values from
        compares of ``pay_cnt`` itself, side by side, picked by whether it counts this beat,
        instead of compares of its next value (``pay_cnt + 1``): no carry chain in series
        with their compares (``pay_cnt`` -> ``first_r`` / ``e_wrote``, 8.24 / 8.68 / 8.58 ns at
        session 42's landing seeds 1 and 5, docs/benchmarks.md session 43); the same values;
        off by default;
      - ``early_lengths``: the length check's IPv4 and UDP halves, for a field that arrives
        before the header's last beat, from registers (``(field - extra) / 4`` and whether it
        is a whole multiple, loaded every cycle as ``csum_early`` is), so H1 compares them with
        ``element_count``: no adder in front of ``h_len_ok`` / ``h_all_ok_b`` (``hdr`` ->
        ``h_all_ok_b``, 8.38 ns at session 42's landing seed 2, docs/benchmarks.md session
        43); the same verdicts; off by default;
      - ``free_head`` (with ``registered_desc``): the descriptor FIFO's head register loads the
        pushed descriptor's value whenever the FIFO is empty, pushed or not
        (``UnguardedFIFO(free_head=True)``), so ``v_push`` (its write enable) reaches no head bit
        (``v_push`` -> ``desc_fifo.r_last``, 8.32-8.56 ns at session 44's seeds 1 / 2,
        docs/benchmarks.md session 45); the same values wherever read; off by default;
      - ``room_count``: ``desc_room`` (the descriptor FIFO's room, registered) from the parser's
        own count of the FIFO's entries (``desc_count``, loaded from the FIFO's two enables,
        equal to its ``level`` in every cycle: ``copy_error``), compared with three constants
        that ``v_push`` / ``e_valid`` pick, instead of ``level`` (the FIFO's pointers'
        difference) + ``v_push`` + ``e_valid``: the FIFO's ``produce`` (read by its LUT RAM's
        write address, spread over the chip) reaches no ``desc_room`` logic and no adder is in
        front of the compare (``desc_fifo.produce`` -> ``desc_room``, 9.03 ns, a 4.7 ns route
        into the adder's carry chain at session 46's landing seed 1, docs/benchmarks.md session
        47); the same values cycle for cycle; off by default.

    Ports:
      - ``s_axis``: ``In(AXIStreamSignature(W, user_width=1))`` — frames, tuser = frame error;
      - ``m_msg``: ``Out(message_stream(W))`` — accepted messages (registered outputs);
      - ``local_mac`` (48), ``local_ip`` (32), ``udp_port`` (16), ``max_elements`` (16): ``In``,
        configuration, stable between frames; the element limit used is
        ``min(max_elements port, max_elements parameter)`` for contributions and the
        ``max_elements`` parameter for CONTROL messages (:func:`wanreduce.model.element_limit`);
      - ``frame_in``, ``accept``, ``drop`` (1) and ``drop_reason`` (4, a ``Drop`` code): ``Out``,
        one-cycle event strobes, one per frame (``frame_in``) and one of accept/drop per frame.
    """

    def __init__(self, data_width: int, *, max_elements: int, fifo_depth: int | None = None,
                 accept_control: bool = False, registered_more: bool = False,
                 registered_desc: bool = False, split_compares: bool = False,
                 lazy_head: bool = False, registered_one: bool = False,
                 direct_pay_flags: bool = False, early_lengths: bool = False,
                 free_head: bool = False, room_count: bool = False) -> None:
        check_data_width(data_width)
        if lazy_head and not registered_desc:
            raise ValueError("lazy_head needs registered_desc=True, got registered_desc=False")
        if registered_one and not registered_desc:
            raise ValueError("registered_one needs registered_desc=True, got registered_desc=False")
        if free_head and not registered_desc:
            raise ValueError("free_head needs registered_desc=True, got registered_desc=False")
        if (not isinstance(max_elements, int) or isinstance(max_elements, bool)
                or not 1 <= max_elements <= wire.MAX_ELEMENTS_JUMBO):
            raise ValueError(f"max_elements must be an integer from 1 to "
                             f"{wire.MAX_ELEMENTS_JUMBO}, got {max_elements!r}")
        max_beats = payload_beats(max_elements, data_width)
        if fifo_depth is None:
            fifo_depth = 1 << max(1, (2 * max_beats - 1).bit_length())
        elif (not isinstance(fifo_depth, int) or isinstance(fifo_depth, bool) or fifo_depth < 2
              or fifo_depth & (fifo_depth - 1) or fifo_depth < max_beats):
            raise ValueError(f"fifo_depth must be a power of two >= 2 holding one maximum-size "
                             f"message ({max_beats} beats), got {fifo_depth!r}")
        self.data_width = data_width
        self.element_limit = max_elements
        self.max_payload_beats = max_beats
        self.fifo_depth = fifo_depth
        self.accept_control = bool(accept_control)
        self.registered_more = bool(registered_more)
        self.registered_desc = bool(registered_desc)
        self.split_compares = bool(split_compares)
        self.lazy_head = bool(lazy_head)
        self.registered_one = bool(registered_one)
        self.direct_pay_flags = bool(direct_pay_flags)
        self.early_lengths = bool(early_lengths)
        self.free_head = bool(free_head)
        self.room_count = bool(room_count)
        super().__init__({
            "s_axis": In(AXIStreamSignature(data_width, user_width=1)),
            "m_msg": Out(message_stream(data_width)),
            "local_mac": In(48),
            "local_ip": In(32),
            "udp_port": In(16),
            "max_elements": In(16),
            "frame_in": Out(1),
            "accept": Out(1),
            "drop": Out(1),
            "drop_reason": Out(4),
        })
        # observability (not a port): a payload read whose data is used meets a write to the
        # same row in the same cycle (never: the memory is built with no_rw_check on that
        # basis; the benches check it)
        self.rw_hazard = Signal()
        # observability (not a port): a flip-flop copy of the write side's state (``stores``,
        # ``first_payload``, worked out a cycle ahead for ``tready``) differs from what it stands
        # for (never, if right; the benches check it)
        self.copy_error = Signal()

    @property
    def accepted_types(self) -> tuple[int, ...]:
        """Message types passed on (the ``accept`` argument of ``model.parse_frame``)."""
        if self.accept_control:
            return (wire.MsgType.CONTRIBUTION, wire.MsgType.CONTROL)
        return (wire.MsgType.CONTRIBUTION,)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        W = self.data_width
        HB = header_beats(W)
        KB = W // 8
        L = lanes(W)
        log2_l = L.bit_length() - 1
        PMAX = self.max_payload_beats
        DEPTH = self.fifo_depth
        AW = DEPTH.bit_length() - 1
        s = self.s_axis

        # ``last``: index of the message's last payload beat (beats - 1)
        desc_layout = data.StructLayout({"hdr": AggHeaderLayout, "last": range(PMAX)})

        # ``no_rw_check``: a row is read for output only after its frame's descriptor was pushed
        # (at least two cycles after the row's last write) and is not rewritten before it is read
        # (the full check), so a read that meets a write to the same row is one whose data is
        # not used; yosys need not emulate read-old-data there (address comparators and an
        # output multiplexer behind the block RAM, in front of the demultiplexer).
        m.submodules.payload_mem = mem = Memory(shape=W, depth=DEPTH, init=[],
                                                attrs={"no_rw_check": 1})
        wp = mem.write_port()
        rp = mem.read_port(transparent_for=())
        # (no full check in its write enable: desc_room below guarantees room for every push)
        m.submodules.desc_fifo = desc = UnguardedFIFO(desc_layout.size, DESC_DEPTH,
                                                      registered_head=self.registered_desc,
                                                      lazy_head=self.lazy_head,
                                                      registered_one=self.registered_one,
                                                      free_head=self.free_head)
        desc_w = data.View(desc_layout, desc.w_data)
        desc_r = data.View(desc_layout, desc.r_data)

        wr_ptr = Signal(AW + 1)  # next payload write address (one wrap bit)
        rd_ptr = Signal(AW + 1)  # next payload read address; entries below it are free

        # ---------------------------------------------------------------- write side
        beat = Signal(range(HB + 1))  # header beat index; HB = in the payload
        pay_cnt = Signal(range(PMAX + 2))  # payload beats so far, saturating at PMAX + 1
        err = Signal()  # tuser seen on an earlier beat of this frame
        cur_start = Signal(AW + 1)  # where this frame's payload starts
        hdr = Signal(HEADER_BITS)
        hdr_done = Signal()  # hdr holds a complete header (pulse, the cycle after its last beat)

        # Stage E: the frame that ended, waiting for its verdict.
        e_valid = Signal()
        e_err = Signal()
        e_trunc = Signal()
        e_wrote = Signal()
        e_start = Signal(AW + 1)
        e_ok = Signal()  # ended in the payload, no tuser, last beat index and tkeep as expected

        # Stage H1: header checks of the last complete header.
        h1_valid = Signal()
        h_eth_ok = Signal()
        h_ip_ok = Signal()
        h_csum = Signal(20)
        h_dest_ok = Signal()
        h_port_ok = Signal()
        h_agg_ok = Signal()
        h_count_ok = Signal()
        h_len_ok = Signal()  # IPv4 and UDP lengths agree with element_count
        # from the header's last beat as it arrives (exact when count_ok):
        h_last = Signal(range(PMAX))  # index of the last payload beat for element_count
        h_keep = Signal(KB)  # tkeep of the last payload beat for element_count
        h_hdr = Signal(AggHeaderLayout)

        in_payload = beat == HB
        stores = in_payload & (pay_cnt < PMAX)  # a beat now would be written
        first_payload = in_payload & (pay_cnt == 0)
        # ``tready`` reads both as flip-flops worked out a cycle ahead (for a transfer: 0 after
        # tlast, else from beat's and pay_cnt's next values; without: held), the transfer picking
        # last, so no compare of beat / pay_cnt sits between them and the transfer that loads
        # them (cut 9's seed 1: beat -> pay_cnt -> tready -> beat, 8.12 ns, docs/benchmarks.md
        # "Cut 9"); copy_error checks both
        stores_r, first_r = Signal(name="stores_r"), Signal(name="first_r")
        # used == DEPTH, from flip-flops (no pointer subtraction in the tready cycle): the level
        # compares of the cycle before, corrected for that cycle's write and frees (a write adds
        # one; a read or a rollback frees at least one, and never together with a write that
        # would fill the FIFO)
        fifo_full = Signal()
        used = (wr_ptr - rd_ptr)[: AW + 1]
        was_full, was_dm1, wrote, freed = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [was_full.eq(used[AW]), was_dm1.eq(used == DEPTH - 1), wrote.eq(wp.en)]
        m.d.comb += fifo_full.eq(~freed & (was_full | (was_dm1 & wrote)))
        resolve = Signal()
        m.d.comb += resolve.eq(e_valid & (e_trunc | h1_valid))

        # Room in the descriptor FIFO for this frame, the pending push and the pending verdict
        # (level + v_push + e_valid < DESC_DEPTH - 1), registered: that sum grows by at most one per
        # cycle, so "sum < DESC_DEPTH - 2" in the previous cycle implies it (one entry of margin;
        # keeps the level adder and compare out of the tready cycle).
        v_push = Signal()  # stage V: a descriptor to push (the verdict of the cycle before)
        v_hdr = Signal(AggHeaderLayout, reset_less=True)
        v_last = Signal(range(PMAX), reset_less=True)
        desc_room = Signal(init=1)
        if self.room_count:  # from the parser's own count of the entries (the class docstring)
            desc_count = Signal(range(DESC_DEPTH + 1), name="desc_count")  # == desc.level
            m.d.sync += desc_count.eq(Mux(v_push & ~desc.r_en, desc_count + 1,
                                          Mux(desc.r_en & ~v_push, desc_count - 1, desc_count)))
            # level + v_push + e_valid < DESC_DEPTH - 2, the additions picking the compare
            m.d.sync += desc_room.eq(Mux(v_push & e_valid, desc_count < DESC_DEPTH - 4,
                                         Mux(v_push | e_valid, desc_count < DESC_DEPTH - 3,
                                             desc_count < DESC_DEPTH - 2)))
        else:
            m.d.sync += desc_room.eq(desc.level + v_push + e_valid < DESC_DEPTH - 2)
        ready = Signal()
        m.d.comb += ready.eq(
            ~(e_valid & ~resolve)  # E is waiting for H1 (a frame that ended at byte 64)
            & ~(stores_r & fifo_full)
            & ~(first_r & e_valid & e_wrote)  # never write before the rollback is known
            & desc_room
        )
        m.d.comb += s.tready.eq(ready)
        xfer = s.tvalid & ready

        counts = in_payload & (pay_cnt <= PMAX)  # a transfer now counts a payload beat
        pay_next = Mux(counts, pay_cnt + 1, pay_cnt)
        if self.direct_pay_flags:  # pay_next < PMAX, == 0, != 0 from compares of pay_cnt
            next_below = Mux(counts, pay_cnt < PMAX - 1, pay_cnt < PMAX)
            next_zero = ~in_payload & (pay_cnt == 0)  # (counting makes it 1 or more)
            next_nonzero = in_payload | (pay_cnt != 0)
        else:
            next_below, next_zero, next_nonzero = pay_next < PMAX, pay_next == 0, pay_next != 0
        header_complete = (beat == HB - 1) & ~(s.tlast & ~s.tkeep.all())
        in_payload_x = in_payload | (beat == HB - 1)  # after a transfer without tlast
        m.d.sync += [
            stores_r.eq(Mux(xfer, ~s.tlast & in_payload_x & next_below, stores_r)),
            first_r.eq(Mux(xfer, ~s.tlast & in_payload_x & next_zero, first_r)),
        ]
        copy_error = (stores_r != stores) | (first_r != first_payload)
        if self.registered_desc:  # the descriptor FIFO's head and ready copies too
            copy_error = copy_error | desc.copy_error
        if self.room_count:  # the parser's count of the descriptors
            copy_error = copy_error | (desc_count != desc.level)
        m.d.comb += self.copy_error.eq(copy_error)
        m.d.comb += [
            wp.addr.eq(wr_ptr[:AW]),
            wp.data.eq(s.tdata),
            wp.en.eq(xfer & stores),
        ]
        m.d.sync += [hdr_done.eq(xfer & header_complete), self.frame_in.eq(xfer & s.tlast)]
        # Header capture: slot ``beat`` takes tdata every cycle, transfer or not (no tready in
        # the enable of 512 flip-flops). A slot is overwritten until its beat transfers, and
        # ``hdr`` is read only at ``hdr_done``, when every slot holds its transferred beat.
        with m.Switch(beat):
            for i in range(HB):
                with m.Case(i):
                    m.d.sync += hdr[i * W:(i + 1) * W].eq(s.tdata)
        with m.If(xfer):
            with m.If(~in_payload):
                m.d.sync += beat.eq(beat + 1)
            with m.If(stores):
                m.d.sync += wr_ptr.eq(wr_ptr + 1)
                with m.If(pay_cnt == 0):
                    m.d.sync += cur_start.eq(wr_ptr)
            m.d.sync += [pay_cnt.eq(pay_next), err.eq(err | s.tuser)]
            with m.If(s.tlast):
                m.d.sync += [
                    beat.eq(0), pay_cnt.eq(0), err.eq(0),
                    e_err.eq(err | s.tuser),
                    e_trunc.eq(~in_payload & ~header_complete),
                    e_wrote.eq(next_nonzero),
                    e_start.eq(Mux(pay_cnt == 0, wr_ptr, cur_start)),
                    e_ok.eq(in_payload & (pay_cnt == h_last) & (s.tkeep == h_keep)
                            & ~err & ~s.tuser),
                ]

        # ---------------------------------------------------------------- header checks (H1)
        def f(name: str):
            return frame_field(hdr, name)

        count = f("element_count")
        # the element limit, registered (the port comes from the control block, across the chip)
        limit = Signal(16, init=self.element_limit)
        m.d.sync += limit.eq(Mux(self.max_elements < self.element_limit, self.max_elements,
                                 self.element_limit))
        eth_dst = f("eth_dst")
        ip_dst = f("ip_dst")
        # The address compares against the configuration, registered as the beat holding the
        # field's last byte arrives (that beat's slot of ``hdr`` taken from tdata, as count_m1
        # below), so the configuration ports reach one flip-flop each and H1's checks start
        # from flip-flops (cut 11, docs/benchmarks.md: local_ip -> h_ip_ok -> h_all_ok_a, 8.11
        # ns). The configuration is sampled at that beat, never before the frame's first beat:
        # a change made with the first beat still applies to the frame.
        def arriving_eq(name: str, value: Value) -> Value:
            """``name`` == ``value``, registered while the field's last beat is at tdata (with
            ``split_compares`` a flip-flop per byte, ANDed by the reader)."""
            fld = wire.FIELD[name]
            b = (fld.offset + fld.size - 1) // KB
            got = frame_field(Cat(hdr[:b * W], s.tdata), name)
            if not self.split_compares:
                eq = Signal(name=f"{name}_eq")
                with m.If(beat == b):
                    m.d.sync += eq.eq(got == value)
                return eq
            parts = [Signal(name=f"{name}_eq{k}") for k in range(len(got) // 8)]
            with m.If(beat == b):
                m.d.sync += [p.eq(got[8 * k:8 * k + 8] == value[8 * k:8 * k + 8])
                             for k, p in enumerate(parts)]
            return Cat(*parts).all()

        mac_eq, ip_eq = arriving_eq("eth_dst", self.local_mac), arriving_eq("ip_dst", self.local_ip)
        words = [Cat(hdr[8 * (b + 1):8 * (b + 2)], hdr[8 * b:8 * (b + 1)])
                 for b in range(wire.IPV4_OFFSET, wire.IPV4_OFFSET + wire.IPV4_HEADER_BYTES, 2)]
        assert len(words) == _IP_WORDS

        def add_level(ws: list) -> list:  # one level of a balanced adder tree
            return [ws[i] + ws[i + 1] if i + 1 < len(ws) else ws[i] for i in range(0, len(ws), 2)]

        def add_tree(ws: list):
            while len(ws) > 1:
                ws = add_level(ws)
            return ws[0]
        msg_type = f("msg_type")
        # ELEMENT_COUNT (model.element_limit): CONTROL messages are bounded by the parameter
        # (the payload memory), not by the register, so no MAX_ELEMENTS value locks the host out
        count_in_limit = count <= limit
        if self.accept_control:
            count_in_limit = Mux(msg_type == wire.MsgType.CONTROL,
                                 count <= self.element_limit, count_in_limit)
        type_ok = 0
        for t in self.accepted_types:
            type_ok = type_ok | (msg_type == int(t))
        # last payload beat's index and tkeep, from the header's last beat as it arrives (slot
        # HB - 1 and these take tdata every cycle until that beat transfers)
        count_m1 = (frame_field(Cat(hdr[:(HB - 1) * W], s.tdata), "element_count") - 1)[:16]
        last_lane = count_m1[:log2_l] if log2_l else Const(0, 1)
        with m.If(beat == HB - 1):
            m.d.sync += [h_last.eq(count_m1 >> log2_l),
                         h_keep.eq(Cat(*[(last_lane >= j).replicate(4) for j in range(L)]))]
        # IPv4 checksum: good when the 20-bit sum of the ten words folds to 0xFFFF, i.e. is
        # 0xFFFF * k, k = 1..10. When the IPv4 header's last byte is in a header beat before the
        # last (W <= 128), its sum is registered every cycle (``csum_early``, through two
        # register stages when there are two spare beats: the IPv4 words of ``hdr`` are stable
        # from their beat until the frame ends) and the compare is done into H1, so the verdict
        # sees one flip-flop; otherwise (W >= 256) the sum goes into H1 and the compare is part
        # of the verdict.
        def csum_good(total):
            good = 0
            for k in range(1, _IP_WORDS + 1):
                good = good | (total == 0xFFFF * k)
            return good

        ip_last_beat = (wire.IPV4_OFFSET + wire.IPV4_HEADER_BYTES - 1) // KB
        spare = (HB - 1) - ip_last_beat  # cycles between the IPv4 words and hdr_done
        early_csum = spare >= 1
        h_csum_ok = Signal()
        if early_csum:
            csum_early = Signal(20)
            if spare >= 2:  # W = 64: the adder tree in two register stages
                half = [Signal(len(v), name=f"csum_part{i}")
                        for i, v in enumerate(add_level(add_level(words)))]
                m.d.sync += [h.eq(v) for h, v in zip(half, add_level(add_level(words)), strict=True)]
                m.d.sync += csum_early.eq(add_tree(half))
            else:
                m.d.sync += csum_early.eq(add_tree(words))
            csum_ok = h_csum_ok
        else:
            csum_ok = csum_good(h_csum)
        with m.If(resolve & ~e_trunc):
            m.d.sync += h1_valid.eq(0)

        def length_ok(name: str, extra: int) -> Value:
            """``name`` == 4 * element_count + ``extra``. With ``early_lengths`` and the field
            before the header's last beat: ``(field - extra) / 4`` and "field >= extra and a
            whole multiple of 4 above it" registered every cycle (its slot of ``hdr`` is stable
            from its beat to the frame's end, as for ``csum_early``), so the check is an equality
            of registers and ``element_count``, no adder."""
            fld = f(name)
            if not (self.early_lengths and (wire.FIELD[name].offset + wire.FIELD[name].size - 1) // KB < HB - 1):
                return fld == (count << 2) + extra
            quot, fits = Signal(len(fld) - 2, name=f"{name}_q"), Signal(name=f"{name}_fits")
            m.d.sync += [quot.eq((fld - extra)[2:len(fld)]),
                         fits.eq((fld >= extra) & (fld[:2] == extra % 4))]
            return fits & (quot == count)
        h_checks = [  # header checks registered in H1 (each for its drop reason)
            (h_eth_ok, f("eth_type") == wire.ETHERTYPE_IPV4),
            (h_ip_ok, ((f("ip_version_ihl") == wire.IPV4_VERSION_IHL)
                       & ((f("ip_flags_frag") & 0x3FFF) == 0)
                       & (f("ip_proto") == wire.IPV4_PROTO_UDP))),
            (h_csum_ok, csum_good(csum_early) if early_csum else Const(0)),
            (h_dest_ok, ((mac_eq | eth_dst[40]) & (ip_eq | (ip_dst[28:32] == 0xE)))),
            (h_port_ok, f("udp_dport") == self.udp_port),
            (h_agg_ok, (f("magic") == wire.MAGIC) & (f("version") == wire.VERSION) & type_ok),
            (h_count_ok, (count != 0) & count_in_limit),
            (h_len_ok, (length_ok("ip_total_length", wire.IPV4_HEADER_BYTES + wire.UDP_HEADER_BYTES
                                  + wire.AGG_HEADER_BYTES)
                        & length_ok("udp_length", wire.UDP_HEADER_BYTES + wire.AGG_HEADER_BYTES))),
        ]
        # ... and all of them at once, for the verdict's accept/rollback (the reason code uses
        # the individual bits; this keeps an 8-input AND out of the rollback -> wr_ptr path)
        # (in two halves, so H1's own path stays short)
        h_all_ok = [Signal(name="h_all_ok_a"), Signal(name="h_all_ok_b")]
        all_ok = [Const(1), Const(1)]
        for k, (reg, cond) in enumerate(h_checks):
            if reg is not h_csum_ok or early_csum:
                all_ok[k * 2 // len(h_checks)] = all_ok[k * 2 // len(h_checks)] & cond
        with m.If(hdr_done):
            m.d.sync += [
                h1_valid.eq(1),
                *[reg.eq(cond) for reg, cond in h_checks],
                h_all_ok[0].eq(all_ok[0]), h_all_ok[1].eq(all_ok[1]),
                h_csum.eq(add_tree(words)),
            ]
            for name in AggHeaderLayout.members:
                m.d.sync += getattr(h_hdr, name).eq(f(name))

        # ---------------------------------------------------------------- verdict
        len_ok = h_len_ok & e_ok  # (e_ok is 0 on FRAME_ERROR and TRUNCATED, checked first)
        checks = [
            (e_err, Drop.FRAME_ERROR),
            (e_trunc, Drop.TRUNCATED),
            (~h_eth_ok, Drop.ETHERTYPE),
            (~h_ip_ok, Drop.IP_HEADER),
            (~csum_ok, Drop.IP_CHECKSUM),
            (~h_dest_ok, Drop.DESTINATION),
            (~h_port_ok, Drop.UDP_PORT),
            (~h_agg_ok, Drop.AGG_HEADER),
            (~h_count_ok, Drop.ELEMENT_COUNT),
            (~len_ok, Drop.LENGTH),
        ]
        assert [c[1] for c in checks] == list(Drop), "checks must follow the Drop enum order"
        reason = Signal(4)
        ok = Signal()
        m.d.comb += ok.eq(e_ok & h_all_ok[0] & h_all_ok[1] & (1 if early_csum else csum_ok))
        for cond, code in reversed(checks):  # the first failing check wins (assigned last)
            with m.If(cond):
                m.d.comb += reason.eq(int(code))

        # Stage V: an accepted frame's descriptor is pushed the cycle after its verdict, from
        # registers (the verdict logic does not drive the descriptor FIFO's write enable, which
        # fans out to the whole LUT-RAM word and the level counter).
        # (v_hdr/v_last copy H1 every cycle: no verdict in their enable either.)
        m.d.sync += [self.accept.eq(0), self.drop.eq(0), v_push.eq(0),
                     v_hdr.eq(h_hdr), v_last.eq(h_last)]
        m.d.comb += [desc_w.hdr.eq(v_hdr), desc_w.last.eq(v_last), desc.w_en.eq(v_push)]
        rollback = resolve & ~ok & e_wrote
        with m.If(resolve):
            m.d.sync += e_valid.eq(0)
            with m.If(ok):
                m.d.sync += [v_push.eq(1), self.accept.eq(1)]
            with m.Else():
                m.d.sync += [self.drop.eq(1), self.drop_reason.eq(reason)]
                with m.If(e_wrote):
                    m.d.sync += wr_ptr.eq(e_start)
        with m.If(xfer & s.tlast):
            m.d.sync += e_valid.eq(1)

        # ---------------------------------------------------------------- read side
        out = self.m_msg
        out_valid = Signal()
        out_first = Signal()
        out_last = Signal()
        if self.lazy_head:  # out_hdr from registers that load every cycle (lazy_head above):
            # after a read the FIFO's r_last (its head register) holds the descriptor read
            hdr_o, took = Signal(AggHeaderLayout, name="hdr_o"), Signal(name="took")
            out_hdr = Mux(took, data.View(desc_layout, desc.r_last).hdr.as_value(), hdr_o.as_value())
            m.d.sync += [hdr_o.eq(out_hdr), took.eq(desc.r_en)]
        else:
            out_hdr = Signal(AggHeaderLayout)
        rd_left = Signal(range(PMAX + 1))  # beats of the current message still to read
        if self.registered_more:  # (rd_left != 0), loaded with rd_left below
            more = Signal(name="rd_more")
        else:
            more = rd_left != 0
        advance = ~out_valid | out.ready
        m.d.sync += freed.eq(rollback | (advance & (more | desc.r_rdy)))
        m.d.comb += self.rw_hazard.eq(wp.en & advance & (more | desc.r_rdy)
                                      & (wp.addr == rp.addr))
        m.d.comb += [
            rp.addr.eq(rd_ptr[:AW]),
            rp.en.eq(advance),
            out.valid.eq(out_valid),
            out.payload.data.eq(rp.data),
            out.payload.hdr.eq(out_hdr),
            out.payload.first.eq(out_first),
            out.payload.last.eq(out_last),
        ]
        with m.If(advance):
            with m.If(more):
                m.d.sync += [
                    rd_ptr.eq(rd_ptr + 1), rd_left.eq(rd_left - 1),
                    out_valid.eq(1), out_first.eq(0), out_last.eq(rd_left == 1),
                ]
                if self.registered_more:
                    m.d.sync += more.eq(rd_left != 1)
            with m.Elif(desc.r_rdy):
                m.d.comb += desc.r_en.eq(1)
                m.d.sync += [
                    rd_ptr.eq(rd_ptr + 1), rd_left.eq(desc_r.last),
                    out_valid.eq(1), out_first.eq(1), out_last.eq(desc_r.last == 0),
                    *([] if self.lazy_head else [out_hdr.eq(desc_r.hdr)]),
                ]
                if self.registered_more:
                    m.d.sync += more.eq(desc_r.last != 0)
            with m.Else():
                m.d.sync += out_valid.eq(0)
        return m
