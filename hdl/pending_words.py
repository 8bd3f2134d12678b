"""The reducer's ``pending`` bits (a slot is COMPLETE, waiting for in-order release) as 64-bit
words in block RAM, with the in-order release scan over two words (docs/large_slots.md,
"Pending words and the two-word release scan: built").

Today the reducer keeps S pending bits in flip-flops and scans 2S bits in one cycle; here they
are S/64 words (``min(64, S)`` bits each) in two banks, even and odd words, so the two words a
scan step reads (a word and the next one of the job's region) come from different banks except
at a region's wrap with an unaligned base (then the step scans one word). Every operation is a
read-modify-write: the read is issued in the cycle the operation is accepted, the word is
written back in the next cycle (the *data cycle*), and every read port is transparent to its
bank's write port, so an operation accepted in a data cycle sees that cycle's write (a decision
or release right after another needs no other forwarding).

Operations (``op``, a stream; ``op.ready`` is low while a scan or a region clear goes on):

* ``SET``: the slot's bit is set (a decision completed its chunk behind the job's head).
* ``RELEASE``: the chunk in ``slot`` completed at the head: the run of pending slots behind it,
  in region order (``base``, ``2**log2_window`` slots, wrapping at its end and at S), is found
  and cleared; ``done`` rises with ``run`` (its length) in the data cycle if the run ends within
  the first two words (up to 64 + (64 - offset) slots, offset = the start slot's bit in its
  word), and one cycle later per further two words (128 slots; 64 where the region's wrap puts
  both words in one bank). ``slot``'s own bit is treated as clear (the scan stops there at the
  latest, as the reducer's scan does).
* ``CLEAR``: the region's bits are cleared (window reset), one word per cycle; bits of other
  regions in a shared word are kept.
* ``PEEK``: a ``RELEASE`` that writes nothing: the run the chunk in ``slot`` would release if
  it completed at the head now (``done`` / ``run`` as for ``RELEASE``). The reducer peeks for
  the message that will be decided next, so its decision has the run (docs/reducer.md).

``reach``: in a scan step that is not ``done``, the slots from the start to the end of the words
scanned so far, all pending (the run is at least that long). At least 65 for the whole ring of
S >= 128; for a region it may be only a few slots (its first and last words in the step, its
slots below the start in the first word not seen until the scan wraps).

``bit_ports`` read ports of one bit each (``rd_slot[i]`` in, ``rd_bit[i]`` the slot's bit one
cycle later), transparent to the banks' writes like the scan's ports: the reducer's own pending
bit and the probe's. Each is one more read port per bank, so yosys builds every bank once more.
``bit_stage=True`` (issue 16, round 6): ``rd_bit[i]`` two cycles after ``rd_slot[i]``, the same
bit (the banks as written up to the read's cycle): in the cycle after the read the word's bank
and the offset's low ``BIT_LOW`` bits are chosen and registered (``rd_part{i}``, ``WB / 4``
flip-flops), in the next the rest of the offset, from flip-flops only: the block RAM's late
output reaches one level of logic before a flip-flop (the record path's Fmax).

The scan is the reducer's own (hdl/release_scan.py) on 2 x 64 bits, as two 64-bit carry chains
(``halves``: the record path's Fmax, docs/benchmarks.md): bits outside the region are
transparent, bits below the start forced to 1.

``scan_stages=3`` (default 1: the above, the reducer's words mode and its RTL unchanged): a scan
step takes three cycles after its read (docs/large_slots.md, "The record path's next cut"): R
(the data cycle: the words, masked, registered), S1 (``release_scan(..., stages=2, index=True)``'s
first stage: each half's first zero as a 6-bit index, its bits before it and "all ones",
registered), S2 (the halves combined: ``done`` / ``run`` / ``reach``, the write-back, its clear
masks from the region masks registered in S1, the next step's read). ``op.ready`` is low in R and S1, so the step's registers hold and no other
operation's write lands before S2's (one that would be lost to the write-back); R and S1 read the
step's words again, so S2 writes back the words as read, unregistered. SET and CLEAR keep their
one data cycle. A RELEASE or PEEK answers 3 cycles after it is taken, 3 more per further step.

``scan_stages=5`` (issue 16, round 2: no address arithmetic in front of the banks' addresses):
as 3, but an operation with region arithmetic (RELEASE, PEEK, CLEAR of more than one slot) takes
two cycles before its first read: P1 (the operation as taken, registered; its arithmetic -- the
start slot, the region's words, the next word -- ends in the step's registers) and P2 (the words
read from those registers, nothing written). A RELEASE or PEEK answers 5 cycles after it is taken
(3 more per further step as for 3), a region CLEAR's first word is written 3 cycles after. SET
and CLEAR of one slot (``log2_window`` 0) keep their one data cycle, read at ``slot`` / ``base``
without arithmetic. A CLEAR's mask of the word it writes is a flip-flop (``clr_m``, set a cycle
ahead: in P2 for the first word, as a one-slot CLEAR is taken, as the CLEAR moves to the next
word), so the region's compares reach no bank's write data (round 6). The address taken in a cycle is chosen by ``op.ready`` (not the valid), so
the producer's choice of operation reaches only that multiplexer. Hazards: ``op.ready`` is low in
P1 and P2 (as in R and S1), so no other operation's write lands between the region operation's
first read (P2) and its write-back; a write in the cycle it is taken (an earlier SET's data
cycle) is in the banks by P2's read. Read-after-write for SET and one-slot CLEAR is as for 3.
Round 8 (five only; the same values in every cycle): S1's index from a priority encoder beside
the chain, the next step's second word from the registers side by side (``w_prev``), P1's start
slot in two carry chains (docs/large_slots.md, "(session 39, round 8)").
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .params import check_large_slots
from .reducer_config import slot_of, window_mask
from .release_scan import onehot_index, release_scan

__all__ = ["BIT_LOW", "PendingOp", "PendingWords", "pending_op_layout"]

BIT_LOW = 2  # ``bit_stage``: the offset bits chosen in the read's data cycle (the rest a cycle on)


class PendingOp(enum.Enum, shape=2):
    """What a ``PendingWords`` operation does (see the module docstring)."""
    SET = 0
    RELEASE = 1
    CLEAR = 2
    PEEK = 3


class _Step(enum.Enum, shape=2):
    """What the words read in the last cycle are for (the data cycle's work): the accepted
    operation's ``PendingOp`` + 1."""
    IDLE = 0
    SET = 1
    SCAN = 2
    CLEAR = 3


def pending_op_layout(slots: int) -> data.StructLayout:
    """An operation: ``kind``, ``slot`` (SET: the slot; RELEASE: the chunk completing at the
    head), the job's region ``base`` and ``log2_window`` (RELEASE, CLEAR; clamped to log2 S by
    the caller, as the reducer's configuration does)."""
    sb = (slots - 1).bit_length()
    return data.StructLayout({"kind": PendingOp, "slot": sb, "base": sb, "log2_window": range(sb + 1)})


class PendingWords(wiring.Component):
    """Pending bits in block-RAM words with the two-word release scan (module docstring).

    ``op`` in; ``done`` / ``run`` out (a RELEASE or PEEK has finished: ``run`` slots released
    behind ``slot``); ``reach`` (a scan step not done: the run so far); ``idle``: no operation's data cycle now; ``rd_slot`` / ``rd_bit``: the
    ``bit_ports`` one-bit read ports. ``banks``: the memories (even words, odd words), for tests
    and inspection. ``scan_stages``: 1, 3 or 5 cycles to a scan's answer; ``bit_stage``: the bit
    ports answer in two cycles (module docstring).
    """

    def __init__(self, *, slots: int, bit_ports: int = 0, scan_stages: int = 1, bit_stage: bool = False) -> None:
        check_large_slots(slots)
        if scan_stages not in (1, 3, 5):
            raise ValueError(f"PendingWords: scan_stages must be 1, 3 or 5, got {scan_stages}")
        self.slots = slots
        self.bit_ports = bit_ports
        self.bit_stage = bit_stage
        self.scan_stages = scan_stages
        self.slot_bits = (slots - 1).bit_length()
        self.word_bits = min(64, slots)
        self.offset_bits = (self.word_bits - 1).bit_length()
        self.words = slots // self.word_bits
        nbanks = 2 if self.words >= 2 else 1
        self.op_layout = pending_op_layout(slots)
        super().__init__({
            "op": In(stream.Signature(self.op_layout)),
            "done": Out(1),
            "run": Out(self.slot_bits),
            "reach": Out(self.slot_bits),
            "idle": Out(1),
            **({"rd_slot": In(data.ArrayLayout(self.slot_bits, bit_ports)), "rd_bit": Out(bit_ports)}
               if bit_ports else {}),
        })
        self.banks = [Memory(shape=self.word_bits, depth=self.words // nbanks, init=[])
                      for _ in range(nbanks)]

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sb, ob, WB, NW = self.slot_bits, self.offset_bits, self.word_bits, self.words
        wi = sb - ob  # word-index bits (0 for a single word)
        ones = Const((1 << WB) - 1, WB)
        ports = []
        for i, mem in enumerate(self.banks):
            m.submodules[f"bank{i}"] = mem
            wr = mem.write_port()
            ports.append((mem.read_port(transparent_for=(wr,)), wr))
        # the one-bit read ports: the slot's word from its bank, its bit selected a cycle later
        for k in range(self.bit_ports):
            rs = self.rd_slot[k]
            rds = [mem.read_port(transparent_for=(ports[i][1],)) for i, mem in enumerate(self.banks)]
            wsel, osel = Signal(1, name=f"rd_bank{k}"), Signal(ob, name=f"rd_off{k}")
            word = rs[ob:]
            for rd in rds:
                m.d.comb += rd.addr.eq(word[1:] if len(self.banks) == 2 else Const(0, 0))
            m.d.sync += [wsel.eq(word[0] if len(self.banks) == 2 else 0), osel.eq(rs[:ob])]
            wd = Signal(WB, name=f"rd_word{k}")  # the word read (named for tests)
            m.d.comb += wd.eq(Mux(wsel, rds[-1].data, rds[0].data))
            if self.bit_stage:  # the bank and the offset's low bits now, registered; the rest a cycle on
                lo = min(BIT_LOW, ob)
                part, hi = Signal(WB >> lo, name=f"rd_part{k}"), Signal(ob - lo, name=f"rd_hi{k}")
                m.d.sync += [part.eq(Cat(*[wd[j << lo:(j + 1) << lo].bit_select(osel[:lo], 1)
                                           for j in range(WB >> lo)])),
                             hi.eq(osel[lo:])]
                m.d.comb += self.rd_bit[k].eq(part.bit_select(hi, 1))
            else:
                m.d.comb += self.rd_bit[k].eq(wd.bit_select(osel, 1))

        def bank(w: Value) -> Value:
            return w[0] if len(self.banks) == 2 else Const(0, 1)

        def addr(w: Value) -> Value:
            return w[1:] if len(self.banks) == 2 else Const(0, 0)

        def next_word(w: Value, w_base: Value, w_last: Value, whole: Value, is_last: Value | None = None) -> Value:
            """The word after ``w`` in region order: the region's first word after its last
            (``is_last``: ``w == w_last`` if known, e.g. a flag registered with ``w``)."""
            return Mux(~whole & (w == w_last if is_last is None else is_last), w_base, (w + 1)[:wi])

        # ---- the data cycle's state (registers loaded when an operation is accepted) ----
        step = Signal(_Step)
        wa, wb = Signal(wi), Signal(wi)  # the words read (wb: the next one in region order)
        same = Signal()  # wa == wb (a region within one word: the scan wraps on it)
        b_scan = Signal()  # wb is read too (another bank, or the same word)
        first = Signal()  # the first step: bits below ``off`` in wa are before the start
        off = Signal(ob)
        own, start, wmask = Signal(sb), Signal(sb), Signal(sb)
        w_base, w_last = Signal(wi), Signal(wi)
        lo, hi = Signal(ob), Signal(ob)  # the region's first bit in w_base, last in w_last
        whole = Signal()  # the region is the whole ring (every bit in it)
        left = Signal(wi + 1)  # CLEAR: words after this one
        five = self.scan_stages == 5
        # five (round 9): ``left != 0`` a flag loaded with ``left`` (equal in every cycle, reset 0
        # as ``left``), so ``op.ready`` sees no OR of ``left``'s bits
        left_nz = Signal(name="left_nz") if five else None
        # five (round 7): the words' compares with the region's ends and ``own``'s word are flags
        # loaded with the words (``wa == w_base`` ...: equal in every cycle, reset 1 as the
        # registers reset 0), ``lo > hi`` with ``lo`` / ``hi``: the region masks and the scan's
        # inputs see flip-flops and compares with constants only (no carry chain after ``op_r``'s)
        fl = {k: Signal(init=int(k != "lo_gt_hi"), name=f"fl_{k}")
              for k in ("a_base", "a_last", "b_base", "b_last", "own_a", "own_b", "lo_gt_hi")} if five else {}

        def region_mask(w: Value, tag: str) -> Value:
            """The region's bits in word ``w`` (``wa`` / ``wb``: ``tag``; a range, wrapping only
            when one word holds the whole region's both ends)."""
            if five:  # lo_e > hi_e only with both ends in ``w``: else lo_e 0 or hi_e WB - 1
                at_base, at_last = fl[f"{tag}_base"], fl[f"{tag}_last"]
                wrap = at_base & at_last & fl["lo_gt_hi"]
            else:
                at_base, at_last = w == w_base, w == w_last
            lo_e = Mux(at_base, lo, 0)
            hi_e = Mux(at_last, hi, WB - 1)
            if not five:
                wrap = lo_e > hi_e
            ge = Cat(*[lo_e <= i for i in range(WB)])
            le = Cat(*[hi_e >= i for i in range(WB)])
            r = Signal(WB, name=f"region_{tag}")
            m.d.comb += r.eq(Mux(whole, ones, Mux(wrap, ge | le, ge & le)))
            return r

        # ---- data cycle: the words read last cycle, modified and written back ----
        def word_data(w: Value) -> Value:
            if len(self.banks) == 1:
                return ports[0][0].data
            return Mux(bank(w), ports[1][0].data, ports[0][0].data)

        da, db = word_data(wa), word_data(wb)
        reg_a, reg_b = region_mask(wa, "a"), region_mask(wb, "b")
        own_w, own_bit = own[ob:], (Const(1, WB) << own[:ob])[:WB]
        own_a, own_b = (fl["own_a"], fl["own_b"]) if five else (own_w == wa, own_w == wb)
        a_last, b_last = (fl["a_last"], fl["b_last"]) if five else (None, None)
        xa = (da & ~Mux(own_a, own_bit, 0)) | ~reg_a
        xb = Mux(b_scan, (db & ~Mux(own_b, own_bit, 0)) | ~reg_b, ones)
        below = Mux(first, Cat(*[off > i for i in range(WB)]), 0)
        three = self.scan_stages >= 3
        pre, pre2 = Signal(), Signal()  # five: P1 (the operation in ``op_r``), P2 (the words read)
        if three:  # R: the scan's inputs registered; S1: the halves (release_scan's first stage); S2: the rest
            phase = Signal(2)  # a SCAN step's cycle after its read: 0 R, 1 S1, 2 S2 (reset 0, never X)
            xa_r, xb_r = Signal(WB, name="scan_xa_r"), Signal(WB, name="scan_xb_r")
            # five (round 7): ``below`` ORed into ``xa_r`` in R (the scan ORs it in S1 again:
            # ``first`` / ``off`` hold from R to S1, no step is loaded between), so S1's chain
            # starts at a flip-flop, not behind ``off``'s 64 compares
            m.d.sync += [xa_r.eq(xa | below if five else xa), xb_r.eq(xb)]
            # five (round 8): each half's index from a priority encoder of ``scan_x*_r`` beside its
            # carry chain (``encoder``), not from the chain's one-hot through OR trees
            pos, before, none = release_scan(m, xa_r, xb_r, below, "w", halves=True, stages=2, index=True,
                                             below_in_lo=five, encoder=five)
            scan_wait = ((step == _Step.SCAN) & (phase != 2)) | pre | pre2  # no result, no write, no operation
            scan_end = (step == _Step.SCAN) & (phase == 2) & ~pre2
            # S2's clear masks from the region masks registered in S1 (wa / wb hold through a
            # step's R, S1 and S2): the 64 compares are not in front of the write-back
            reg_a_r, reg_b_r = Signal(WB, name="region_a_r"), Signal(WB, name="region_b_r")
            m.d.sync += [reg_a_r.eq(reg_a), reg_b_r.eq(reg_b)]
            clr_a, clr_b = before[:WB] & reg_a_r, before[WB:] & reg_b_r
        else:
            fz, before, none = release_scan(m, xa, xb, below, "w", halves=True)  # two 64-bit chains: Fmax
            pos = onehot_index(fz)  # the first bit not pending, in wa : wb
            scan_end = step == _Step.SCAN
            clr_a, clr_b = before[:WB] & reg_a, before[WB:] & reg_b
        stop = Cat(pos[:ob], Mux(pos[ob], wb, wa))
        peek = Signal()  # the SCAN is a PEEK: nothing is written
        wl = Mux(b_scan & ~same, wb, wa)  # the last word scanned
        wl_last = Mux(b_scan & ~same, b_last, a_last) if five else wl == w_last
        past = Mux(~whole & wl_last, Cat(lo, w_base), Cat(Const(0, ob), (wl + 1)[:wi]))  # the next slot
        m.d.comb += [self.done.eq(scan_end & ~none),
                     self.run.eq((stop - start)[:sb] & wmask), self.reach.eq((past - start)[:sb] & wmask),
                     self.idle.eq((step == _Step.IDLE) & ~pre)]
        # a CLEAR's mask of ``wa``: five stages, registered a cycle ahead (``clr_m``, round 6: the
        # region's compares, a carry chain, are in front of no bank's write data); else ``reg_a``
        clr_m = Signal(WB, name="clr_m") if five else reg_a
        wr_a = Signal(WB)
        with m.Switch(step):
            with m.Case(_Step.SET):
                m.d.comb += wr_a.eq(da | own_bit)
            with m.Case(_Step.SCAN):
                m.d.comb += wr_a.eq(da & ~(clr_a | Mux(same, clr_b, 0)))
            with m.Default():
                m.d.comb += wr_a.eq(da & ~clr_m)
        wr_a_en = (step != _Step.IDLE) & ~peek
        wr_b_en = (step == _Step.SCAN) & b_scan & ~same & ~peek
        if three:  # a scan writes back in S2 only (the words read again in R and S1: S2's banks' data)
            wr_a_en, wr_b_en = wr_a_en & ~scan_wait, wr_b_en & ~scan_wait
        for b, (_, wr) in enumerate(ports):
            on_a = wr_a_en & (bank(wa) == b)
            m.d.comb += [wr.en.eq(on_a | (wr_b_en & (bank(wb) == b))),
                         wr.addr.eq(Mux(on_a, addr(wa), addr(wb))),
                         wr.data.eq(Mux(on_a, wr_a, db & ~clr_b))]

        scan_on = scan_end & none  # the run goes on past these two words
        clear_on = (step == _Step.CLEAR) & (left_nz if five else left != 0) & ~pre2
        ready = ~scan_on & ~clear_on
        m.d.comb += self.op.ready.eq(ready & ~scan_wait if three else ready)

        # ---- the next reads: an accepted operation's words, or the next step's ----
        accept = self.op.valid & self.op.ready
        if five:  # the region arithmetic from the operation registered in P1 (module docstring)
            op_r = Signal(self.op_layout)
            p_in = self.op.payload
            slow = (p_in.kind != PendingOp.SET) & ((p_in.kind != PendingOp.CLEAR) | (p_in.log2_window != 0))
            with m.If(accept):
                m.d.sync += op_r.eq(p_in)
            m.d.sync += [pre.eq(accept & slow), pre2.eq(pre)]
            p = op_r
        else:
            p = self.op.payload
        whole_c = p.log2_window >= sb
        last_c = slot_of(p, Const((1 << sb) - 1, sb), sb)  # the region's last slot
        if five:  # round 8: the slot after ``slot`` with one carry chain fewer in series: ``(d + 1) &
            # wmask`` (d = slot - base) is 0 where d's window bits are all ones, else ``(d & wmask) +
            # 1``, and ``base + (d & wmask) + 1`` is one chain with a carry in (both operands' bit 0 set)
            d_c, wm_c = (p.slot - p.base)[:sb], window_mask(p.log2_window, sb)
            start_c = Mux((d_c | ~wm_c).all(), p.base,
                          (Cat(Const(1, 1), p.base) + Cat(Const(1, 1), d_c & wm_c))[1:sb + 1])
        else:
            start_c = slot_of(p, (p.slot - p.base + 1)[:sb], sb)  # the slot after ``slot``
        wbase_c, wlast_c = p.base[ob:], last_c[ob:]
        wa_c = Signal(wi)
        with m.Switch(p.kind):
            with m.Case(PendingOp.SET):
                m.d.comb += wa_c.eq(p.slot[ob:])
            with m.Case(PendingOp.RELEASE, PendingOp.PEEK):
                m.d.comb += wa_c.eq(start_c[ob:])
            with m.Default():
                m.d.comb += wa_c.eq(wbase_c)
        scan_c = (p.kind == PendingOp.RELEASE) | (p.kind == PendingOp.PEEK)
        wb_c = Mux(scan_c, next_word(wa_c, wbase_c, wlast_c, whole_c), wa_c)
        nxt_b = next_word(wb, w_base, w_last, whole, b_last)
        na = Mux(step == _Step.SCAN, Mux(b_scan, nxt_b, wb), next_word(wa, w_base, w_last, whole, a_last))
        if five:  # round 8: ``next_word(na)`` from the registers, its candidates side by side (no
            # ``+ 1`` or compare after ``na``'s): after ``w_base`` its next, after ``wb + 1`` ``wb +
            # 2`` or ``w_base`` (``wb + 1 == w_last`` is ``wb == w_prev``, ``w_last - 1`` registered
            # every cycle: stale only in P2, whose reads are the step's own words, ``scan_wait``)
            w_prev = Signal(wi, name="w_prev")
            m.d.sync += w_prev.eq((w_last - 1)[:wi])
            after_b1 = Mux(~whole & (wb == w_prev), w_base, (wb + 2)[:wi])
            after_next = Mux(~whole & b_last, next_word(w_base, w_base, w_last, whole), after_b1)
            nb = Mux(step == _Step.SCAN, Mux(b_scan, after_next, nxt_b), na)
        else:
            nb = Mux(step == _Step.SCAN, next_word(na, w_base, w_last, whole), na)
        na_step, nb_step = na, nb  # the next step's words (scan_on / clear_on)
        if three:  # R and S1 read the step's words again, so S2's write-back has them unregistered
            na, nb = Mux(scan_wait, wa, na), Mux(scan_wait, wb, nb)
        if five:  # taken now: a SET's or one-slot CLEAR's word, no arithmetic (else unused: P1 ignores it)
            fast = Mux(p_in.kind == PendingOp.SET, p_in.slot, p_in.base)[ob:]
            ra, rb = Mux(self.op.ready, fast, na), Mux(self.op.ready, fast, nb)
        else:
            ra, rb = Mux(accept, wa_c, na), Mux(accept, wb_c, nb)
        rd_a, rd_b = Signal(wi, name="rd_a"), Signal(wi, name="rd_b")  # the words read now (named for tests)
        m.d.comb += [rd_a.eq(ra), rd_b.eq(rb)]
        for b, (rd, _) in enumerate(ports):
            m.d.comb += rd.addr.eq(Mux(bank(rd_a) == b, addr(rd_a), addr(rd_b)))

        def load_pair(a: Value, b_: Value) -> list:
            return [wa.eq(a), wb.eq(b_), same.eq(a == b_), b_scan.eq((bank(a) != bank(b_)) | (a == b_))]

        def load_flags(a: Value, b_: Value, base: Value, last: Value, own_w_: Value) -> list:
            """five: the flags of words ``a`` / ``b_`` compared directly (the step's registers)."""
            return [fl["a_base"].eq(a == base), fl["a_last"].eq(a == last), fl["own_a"].eq(own_w_ == a),
                    fl["b_base"].eq(b_ == base), fl["b_last"].eq(b_ == last), fl["own_b"].eq(own_w_ == b_)]

        def load_p1() -> list:
            """five, P1: ``load_pair(wa_c, wb_c)`` and the flags, with no compare after ``wb_c``'s
            ``next_word``: for a scan ``wb_c`` is ``w_base`` after the region's last word (``lastc``)
            and ``wa_c + 1`` else, so its compares are ``wa_c``'s with ``w_base - 1`` ... (mod
            2**wi), and ``wa_c == wb_c`` only if ``lastc`` and ``wa_c == w_base`` (``wa_c + 1 !=
            wa_c``; a single word, ``wi`` 0: always); a CLEAR's ``wb_c`` is ``wa_c``."""
            own_c = p.slot[ob:]
            a_base, a_last_c, a_own = wa_c == wbase_c, wa_c == wlast_c, own_c == wa_c
            lastc = ~whole_c & a_last_c

            def after(other: Value, at_base: Value) -> Value:  # wb_c == other
                return Mux(lastc, at_base, wa_c == (other - 1)[:wi])

            same_s = lastc & a_base if wi else Const(1, 1)
            b_scan_s = Mux(lastc, bank(wa_c) != bank(wbase_c), 1) | same_s
            return [wa.eq(wa_c), wb.eq(wb_c), fl["a_base"].eq(a_base), fl["a_last"].eq(a_last_c),
                    fl["own_a"].eq(a_own), fl["lo_gt_hi"].eq(p.base[:ob] > last_c[:ob]),
                    same.eq(Mux(scan_c, same_s, 1)), b_scan.eq(Mux(scan_c, b_scan_s, 1)),
                    fl["b_base"].eq(Mux(scan_c, after(wbase_c, 1), a_base)),
                    fl["b_last"].eq(Mux(scan_c, after(wlast_c, wbase_c == wlast_c), a_last_c)),
                    fl["own_b"].eq(Mux(scan_c, after(own_c, own_c == wbase_c), a_own))]

        load = pre if five else accept
        with m.If(load):
            m.d.sync += [*(load_p1() if five else load_pair(wa_c, wb_c)), first.eq(1), off.eq(start_c[:ob]),
                         own.eq(p.slot),
                         start.eq(start_c), wmask.eq((last_c - p.base)[:sb]), w_base.eq(wbase_c),
                         w_last.eq(wlast_c), lo.eq(p.base[:ob]), hi.eq(last_c[:ob]), whole.eq(whole_c),
                         left.eq(Mux(whole_c, NW - 1, (wlast_c - wbase_c)[:wi]))]
            if five:  # (wlast_c - wbase_c)[:wi] != 0: the two words differ
                m.d.sync += left_nz.eq(Mux(whole_c, NW > 1, wlast_c != wbase_c))
            # SET, RELEASE, CLEAR, PEEK -> SET, SCAN, CLEAR, SCAN (no writes)
            m.d.sync += [step.eq(Mux(p.kind == PendingOp.PEEK, _Step.SCAN, p.kind.as_value() + 1)),
                         peek.eq(p.kind == PendingOp.PEEK)]
            if three:
                m.d.sync += phase.eq(0)
        if five:  # a SET or one-slot CLEAR taken: its word and bit, no arithmetic; a region operation: P1
            fw = p_in.base
            with m.Elif(accept & ~slow):
                m.d.sync += [*load_pair(fast, fast), own.eq(p_in.slot), w_base.eq(fw[ob:]), w_last.eq(fw[ob:]),
                             lo.eq(fw[:ob]), hi.eq(fw[:ob]), whole.eq(0), left.eq(0), left_nz.eq(0), first.eq(1),
                             step.eq(Mux(p_in.kind == PendingOp.SET, _Step.SET, _Step.CLEAR)), peek.eq(0),
                             *load_flags(fast, fast, fw[ob:], fw[ob:], p_in.slot[ob:]), fl["lo_gt_hi"].eq(0)]
            with m.Elif(accept):
                m.d.sync += step.eq(_Step.IDLE)
            with m.Elif(pre2):
                pass  # P2: the words read from the step's registers (``scan_wait``), the step held
        with m.Elif(scan_on | clear_on):
            m.d.sync += [*load_pair(na, nb), first.eq(0), left.eq(left - 1)]
            if five:
                m.d.sync += [*load_flags(na_step, nb_step, w_base, w_last, own_w), left_nz.eq(left != 1)]
            if three:
                m.d.sync += phase.eq(0)
        if three:
            with m.Elif(scan_wait):
                m.d.sync += phase.eq(phase + 1)
        with m.Else():
            m.d.sync += step.eq(_Step.IDLE)
        if five:  # ``clr_m``: the region's first word's mask from the registers in P2; a one-slot
            # CLEAR's bit as it is taken; a later word is never the first (only ``whole`` comes back
            # to it), the last where no word is left after it (``left`` 1 now): bits up to ``hi``.
            # Round 9: the one-slot bit is loaded whenever a SET / one-slot CLEAR is offered outside
            # P2 and a CLEAR's steps, taken or not (not behind ``op.valid`` / ``op.ready``: the
            # sweep's state and ``left``): ``clr_m`` is read only in a CLEAR step's data cycle,
            # which follows P2, a CLEAR's step or the taking of a one-slot CLEAR, so a bit loaded
            # without the taking is overwritten or unread (the same words written in every cycle)
            with m.If(pre2):
                m.d.sync += clr_m.eq(reg_a)
            with m.Elif(clear_on):
                m.d.sync += clr_m.eq(Mux(whole | (left != 1), ones, Cat(*[hi >= i for i in range(WB)])))
            with m.Elif(~slow):
                m.d.sync += clr_m.eq((Const(1, WB) << p_in.base[:ob])[:WB])
        return m
