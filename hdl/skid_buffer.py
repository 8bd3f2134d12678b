"""Register slice for any valid/ready stream: the core's one skid buffer.

``SkidBuffer(shape, register_type)`` carries a payload of any Amaranth shape (``unsigned(n)``, a
``data.StructLayout``, ...) from ``s`` to ``m`` (``amaranth.lib.stream.Signature(shape)``). The
register type follows Forencich's ``axis_register`` (``REG_TYPE`` 0/1/2):

- ``PASS_THROUGH``: wires; no register, no latency (for configurations that need no cut);
- ``SIMPLE``: one output register; ``m.valid``/``m.payload`` and ``s.ready`` (== ``~m.valid``)
  from flip-flops, but a bubble after every beat: one beat every two cycles at best;
- ``SKID`` (default): an output register plus a second ("skid") register that catches the one
  beat arriving in the cycle after ``m.ready`` drops, because ``s.ready`` is itself a flip-flop
  and so falls one cycle late. One beat per cycle sustained while the sink is ready; latency one
  cycle; ``m.valid``/``m.payload`` and ``s.ready`` come straight from flip-flops.

With every register type no beat is lost, duplicated or reordered under any valid/ready pattern,
and a beat offered on ``m`` stays there unchanged until taken. Data registers carry no reset
(only valid/ready do): data is only looked at when valid. The skid register copies ``s.payload``
whenever it is empty, so its enable is the ``s.ready`` flip-flop and ``m.ready`` reaches only
the output register's enable and two state bits (the shape of the design Glasgow's
``SkidBuffer`` also has).

Users that read the registers themselves (the reducer decodes from its input stages' output
registers and addresses its tag memory from them) use ``m.payload``/``m.valid`` (wires of the
output register), ``s.ready`` (the registered ready) and, with ``SKID``, the extra outputs
``skid``/``skid_valid`` (wires of the skid register: the beat the output register loads next
when ``skid_valid``) directly: nothing but a flip-flop drives any of them.

``ready_copy=True`` (``SKID`` only; the Versa DRAM build's register slices, docs/benchmarks.md
session 42): the skid register's enable is its own copy of ``s.ready`` (``skid_en``), so the
ready flip-flop that the source's logic reads does not also drive every payload bit's clock
enable (``merger_slice0.s__ready`` -> the parser's descriptor head, 109 endpoints, 9.47 ns;
``stage_i.s__ready`` -> ``stage_i.skid_data``, 8.7 ns). yosys merges flip-flops with the same
input and reset value, and the inverted one is ``skid_valid`` already, so the copy differs in
its reset value (0, ``s.ready``'s is 1): after a reset the output register is empty, no beat can
park, and the skid register's load is not used in that cycle; from the next cycle on the two are
equal. ``copy_error`` (an output with the option): the copy differs from ``s.ready`` while the
output register is full (a beat could park; never, if right). Off by default: the RTL unchanged.

``ping_pong=True`` (``SKID`` only; the Versa DRAM core's merger slices and the demux's data
buffer, docs/benchmarks.md session 45): the same two-entry FIFO (``s.ready`` = fewer than two
beats held, ``m.valid`` = at least one, both flip-flops; one cycle of latency; the same beats in
the same cycles) built as two data registers ``slot0`` / ``slot1`` written alternately (``wp``)
and read alternately (``rp``), ``m.payload`` = ``slot[rp]`` (one multiplexer level after the
flip-flops). A slot loads ``s.payload`` in every cycle it is the free slot the next beat goes to
(``s.ready & wp == k``), so no data register's enable depends on ``m.ready``: the sink's ready
reaches only ``rp``, ``m.valid`` and ``s.ready`` (and the enable copies below), not the output
register's enables (218 at W = 64; the merger's grant -> ``core.s_msg__1__payload``, 60
endpoints, 9.06 ns at session 44's seed 5). With ``ready_copy`` too, each slot's enable is its own flip-flop (``slot_en0`` /
``slot_en1``, worked out with ``s.ready`` and ``wp``; ``copy_error``: a copy differs from
``s.ready & wp == k``, never, if right), so no LUT sits between the flip-flops and the enables.
``skid`` / ``skid_valid`` are then ``slot[~rp]`` and "two beats held" (the beat ``m`` shows next).

``sel_copies=n`` (``SKID`` with ``ready_copy``, not ``ping_pong``; the Versa DRAM core's slice in
front of the reducer, docs/benchmarks.md session 46): the output register's load select (skid
register or input) is not ``skid_valid`` but ``n`` flip-flop copies of it (``skid_sel0`` ...),
each selecting a contiguous ``1/n`` of the payload bits, so no single flip-flop drives every
payload bit's multiplexer (``reducer_slice.skid_valid`` -> ``core.s_msg__payload``, one LUT
behind 7.8 ns of routing at session 45's seed 5). Each copy is loaded with ``skid_valid``'s next
value worked out from its own output (``~out_free & (copy | s.valid & s.ready)``), so yosys
cannot merge it with ``skid_valid`` (or another copy); all start at 0: equal to ``skid_valid``
in every cycle by induction. ``copy_error`` also rises if a copy differs from ``skid_valid``.
"""

from __future__ import annotations

import enum

from amaranth.hdl import Cat, Module, Mux, Shape, ShapeLike, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RegisterType", "SkidBuffer"]


class RegisterType(enum.Enum):
    """What sits between ``s`` and ``m`` (Forencich ``axis_register`` ``REG_TYPE``)."""

    PASS_THROUGH = 0
    SIMPLE = 1
    SKID = 2


class SkidBuffer(wiring.Component):
    """Stream register slice of payload ``shape``; see the module docstring.

    Ports: ``s`` (stream in), ``m`` (stream out), both ``stream.Signature(shape)``; with
    ``SKID`` also ``skid`` (``shape``) and ``skid_valid``, the skid register (outputs); with
    ``ready_copy`` also ``copy_error`` (out); ``sync``.
    """

    def __init__(self, shape: ShapeLike, register_type: RegisterType = RegisterType.SKID, *,
                 ready_copy: bool = False, ping_pong: bool = False, sel_copies: int = 0) -> None:
        Shape.cast(shape)  # a clear Amaranth error for something that is not a shape
        if not isinstance(register_type, RegisterType):
            raise ValueError(f"register_type must be one of {', '.join(t.name for t in RegisterType)}, "
                             f"got {register_type!r}")
        if ready_copy and register_type is not RegisterType.SKID:
            raise ValueError(f"ready_copy needs register_type SKID, got {register_type.name}")
        if ping_pong and register_type is not RegisterType.SKID:
            raise ValueError(f"ping_pong needs register_type SKID, got {register_type.name}")
        if sel_copies and (not ready_copy or ping_pong):
            raise ValueError("sel_copies needs ready_copy (its copy_error) and not ping_pong")
        if not 0 <= sel_copies <= Shape.cast(shape).width:
            raise ValueError(f"sel_copies must be 0 .. the payload width, got {sel_copies}")
        self.sel_copies = int(sel_copies)
        self.shape, self.register_type, self.ready_copy = shape, register_type, bool(ready_copy)
        self.ping_pong = bool(ping_pong)
        sig = stream.Signature(shape)
        members = {"s": In(sig), "m": Out(sig)}
        if register_type is RegisterType.SKID:
            members |= {"skid": Out(shape), "skid_valid": Out(1)}
        if self.ready_copy:
            members |= {"copy_error": Out(1)}
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        s, o = self.s, self.m
        if self.register_type is RegisterType.PASS_THROUGH:
            m.d.comb += [o.payload.eq(s.payload), o.valid.eq(s.valid), s.ready.eq(o.ready)]
            return m

        if self.ping_pong:
            return self._elaborate_ping_pong(m)

        # Output register: m.valid and m.payload are driven only from here.
        out_data = Signal(self.shape, reset_less=True)
        out_valid = Signal()
        m.d.comb += [o.payload.eq(out_data), o.valid.eq(out_valid)]
        out_free = ~out_valid | o.ready  # the output register may load this cycle

        if self.register_type is RegisterType.SIMPLE:
            # s.ready == ~out_valid: a beat is taken only into an empty register.
            m.d.comb += s.ready.eq(~out_valid)
            with m.If(out_free):
                m.d.sync += [out_data.eq(s.payload), out_valid.eq(s.valid & ~out_valid)]
            return m

        # Skid register: holds the beat accepted while the output register was stalled.
        skid_data = Signal(self.shape, reset_less=True)
        skid_valid = Signal()
        in_ready = Signal(init=1)  # == ~skid_valid, as its own flip-flop
        m.d.comb += [s.ready.eq(in_ready), self.skid.eq(skid_data), self.skid_valid.eq(skid_valid)]
        # the skid register's enable: in_ready, or with ready_copy its copy (module docstring)
        skid_en = Signal(name="skid_en") if self.ready_copy else in_ready
        with m.If(skid_en):  # enable from a flip-flop: copy the input while empty
            m.d.sync += skid_data.eq(s.payload)
        sels = [Signal(name=f"skid_sel{k}") for k in range(self.sel_copies)]  # (module docstring)
        if sels:
            width, n = Shape.cast(self.shape).width, len(sels)
            out_bits, skid_bits, in_bits = (Value.cast(x) for x in (out_data, skid_data, s.payload))
            with m.If(out_free):
                for k, sel in enumerate(sels):  # copy k selects bits [lo, hi)
                    lo, hi = k * width // n, (k + 1) * width // n
                    m.d.sync += out_bits[lo:hi].eq(Mux(sel, skid_bits[lo:hi], in_bits[lo:hi]))
            m.d.sync += [sel.eq(~out_free & (sel | (s.valid & in_ready))) for sel in sels]
        with m.If(out_free):
            with m.If(skid_valid):
                # Drain the skid beat first; s.ready was low this cycle, nothing arrives.
                m.d.sync += [*([] if sels else [out_data.eq(skid_data)]), out_valid.eq(1), skid_valid.eq(0),
                             in_ready.eq(1)]
                if self.ready_copy:
                    m.d.sync += skid_en.eq(1)
            with m.Else():
                # Pass through (in_ready is 1 whenever the skid register is empty).
                m.d.sync += [*([] if sels else [out_data.eq(s.payload)]), out_valid.eq(s.valid)]
                if self.ready_copy:  # (equal to in_ready from here on after a reset)
                    m.d.sync += skid_en.eq(in_ready)
        with m.Elif(s.valid & in_ready):
            # Output stalled but the source still saw ready high: park the beat.
            m.d.sync += [skid_valid.eq(1), in_ready.eq(0)]
            if self.ready_copy:
                m.d.sync += skid_en.eq(0)
        if self.ready_copy:
            copy_error = out_valid & (skid_en != in_ready)
            if sels:  # (and a select copy differs from skid_valid)
                copy_error = copy_error | Cat(sel != skid_valid for sel in sels).any()
            m.d.comb += self.copy_error.eq(copy_error)
        return m

    def _elaborate_ping_pong(self, m: Module) -> Module:
        """``ping_pong``: the two-entry FIFO as two slots written and read alternately (module
        docstring); the same valid/ready/payload sequence as the output + skid registers."""
        s, o = self.s, self.m
        slots = [Signal(self.shape, reset_less=True, name=f"slot{k}") for k in range(2)]
        wp, rp = Signal(name="wp"), Signal(name="rp")  # the slot written / read next
        out_valid = Signal(name="out_valid")  # at least one beat held
        in_ready = Signal(init=1, name="in_ready")  # fewer than two beats held
        push, pop = s.valid & in_ready, out_valid & o.ready
        m.d.comb += [s.ready.eq(in_ready), o.valid.eq(out_valid), self.skid_valid.eq(~in_ready)]
        with m.If(rp):
            m.d.comb += [o.payload.eq(slots[1]), self.skid.eq(slots[0])]
        with m.Else():
            m.d.comb += [o.payload.eq(slots[0]), self.skid.eq(slots[1])]
        # next state: held' = held + push - pop (push only when fewer than two, pop only when any)
        valid_n, ready_n, wp_n = Signal(), Signal(), Signal()
        m.d.comb += [
            valid_n.eq(push | (out_valid & ~(pop & in_ready))),  # 0 only from (0, no push) / (1, pop, no push)
            ready_n.eq(~out_valid | pop | (in_ready & ~push)),  # 0 only from (2, no pop) / (1, push, no pop)
            wp_n.eq(wp ^ push),
        ]
        m.d.sync += [out_valid.eq(valid_n), in_ready.eq(ready_n), wp.eq(wp_n), rp.eq(rp ^ pop)]
        if self.ready_copy:  # each slot's enable its own flip-flop (s.ready & wp == k, a cycle ahead)
            en = [Signal(init=1, name="slot_en0"), Signal(init=0, name="slot_en1")]
            m.d.sync += [en[0].eq(ready_n & ~wp_n), en[1].eq(ready_n & wp_n)]
            m.d.comb += self.copy_error.eq((en[0] != (in_ready & ~wp)) | (en[1] != (in_ready & wp)))
        else:
            en = [in_ready & ~wp, in_ready & wp]
        for k in range(2):  # the free slot the next beat goes to copies the input, beat or not
            with m.If(en[k]):
                m.d.sync += slots[k].eq(s.payload)
        return m
