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
``valid_copy=True`` (with ``ping_pong``; the DRAM core's demux data buffer, docs/benchmarks.md
session 47): ``m_valid_c`` (out), a flip-flop copy of ``m.valid`` for the sink's arbitration, so
the one flip-flop does not also run across the chip into the sink (``demux.data_skid.m__valid``
-> the merger's grant -> ``merger_slice0.slot_en0`` / the merger's output register, 2.7 ns of
route first, 8.47-8.55 ns at session 46's landing seed 6). It loads ``m.valid``'s next value
written from its own state (``push | (copy & ~(m.ready & s.ready))``; equal by induction, and
its input is not ``m.valid``'s, so yosys keeps it); ``copy_error`` also when it differs.

``valid_copies=n`` / ``mux_copies=k`` (``SKID`` only, not ``ping_pong``; the Versa DRAM
reducer's stage I, docs/benchmarks.md session 46): flip-flop copies of ``skid_valid``, so the
one flip-flop does not select every output register bit and its user's logic too
(``stage_i.skid_valid`` -> ``inputs.e_col``, an 8.7 ns route at main 27983de's seed 1). Each
copy resets to 0 like ``skid_valid`` and loads ``~out_free & (copy | (s.valid & s.ready))``,
``skid_valid``'s next value written from its own state (equal by induction; its input is not
``skid_valid``'s, so yosys keeps it). ``valid_copies``: ``n`` copies out as ``skid_valid_c``
(bit i: copy i) for the user's selects; ``mux_copies``: the output register's load select
(skid register or input) in ``k`` slices of the payload bits, slice i selected by its own copy.
``copy_error`` (an output with either option) is also high when a copy differs from
``skid_valid`` (never, if right). Off by default: the RTL unchanged.
"""

from __future__ import annotations

import enum

from amaranth.hdl import Cat, Const, Module, Mux, Shape, ShapeLike, Signal, Value
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
    ``ready_copy`` also ``copy_error`` (out); with ``valid_copies`` also ``skid_valid_c`` (out;
    ``copy_error`` too); ``sync``.
    """

    def __init__(self, shape: ShapeLike, register_type: RegisterType = RegisterType.SKID, *,
                 ready_copy: bool = False, ping_pong: bool = False, valid_copies: int = 0,
                 mux_copies: int = 0, valid_copy: bool = False) -> None:
        Shape.cast(shape)  # a clear Amaranth error for something that is not a shape
        if not isinstance(register_type, RegisterType):
            raise ValueError(f"register_type must be one of {', '.join(t.name for t in RegisterType)}, "
                             f"got {register_type!r}")
        if ready_copy and register_type is not RegisterType.SKID:
            raise ValueError(f"ready_copy needs register_type SKID, got {register_type.name}")
        if ping_pong and register_type is not RegisterType.SKID:
            raise ValueError(f"ping_pong needs register_type SKID, got {register_type.name}")
        self.shape, self.register_type, self.ready_copy = shape, register_type, bool(ready_copy)
        self.ping_pong = bool(ping_pong)
        if (valid_copies or mux_copies) and (register_type is not RegisterType.SKID or ping_pong):
            raise ValueError("valid_copies / mux_copies need register_type SKID without ping_pong")
        if valid_copies < 0 or not 0 <= mux_copies <= Shape.cast(shape).width:
            raise ValueError(f"valid_copies >= 0 and mux_copies 0 .. the payload width, got {valid_copies} / "
                             f"{mux_copies}")
        self.valid_copies, self.mux_copies = int(valid_copies), int(mux_copies)
        if valid_copy and not ping_pong:
            raise ValueError("valid_copy needs ping_pong=True, got ping_pong=False")
        self.valid_copy = bool(valid_copy)
        sig = stream.Signature(shape)
        members = {"s": In(sig), "m": Out(sig)}
        if register_type is RegisterType.SKID:
            members |= {"skid": Out(shape), "skid_valid": Out(1)}
        if self.valid_copies:
            members |= {"skid_valid_c": Out(self.valid_copies)}
        if self.valid_copy:
            members |= {"m_valid_c": Out(1)}
        if self.ready_copy or self.valid_copies or self.mux_copies or self.valid_copy:
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
        # (valid_copies / mux_copies) skid_valid's copies: the same next value from their own state
        copies = [Signal(name=f"skid_valid_c{i}") for i in range(self.valid_copies + self.mux_copies)]
        for c in copies:
            m.d.sync += c.eq(~out_free & (c | (s.valid & in_ready)))
        if self.mux_copies:  # the output register's load select in slices, each by its own copy
            od, sd, sp = Value.cast(out_data), Value.cast(skid_data), Value.cast(s.payload)
            k, n = self.mux_copies, len(od)
            with m.If(out_free):
                for i, c in enumerate(copies[self.valid_copies:]):
                    lo, hi = i * n // k, (i + 1) * n // k
                    m.d.sync += od[lo:hi].eq(Mux(c, sd[lo:hi], sp[lo:hi]))
        with m.If(out_free):
            with m.If(skid_valid):
                # Drain the skid beat first; s.ready was low this cycle, nothing arrives.
                m.d.sync += [*([] if self.mux_copies else [out_data.eq(skid_data)]), out_valid.eq(1),
                             skid_valid.eq(0), in_ready.eq(1)]
                if self.ready_copy:
                    m.d.sync += skid_en.eq(1)
            with m.Else():
                # Pass through (in_ready is 1 whenever the skid register is empty).
                m.d.sync += [*([] if self.mux_copies else [out_data.eq(s.payload)]), out_valid.eq(s.valid)]
                if self.ready_copy:  # (equal to in_ready from here on after a reset)
                    m.d.sync += skid_en.eq(in_ready)
        with m.Elif(s.valid & in_ready):
            # Output stalled but the source still saw ready high: park the beat.
            m.d.sync += [skid_valid.eq(1), in_ready.eq(0)]
            if self.ready_copy:
                m.d.sync += skid_en.eq(0)
        if self.valid_copies:
            m.d.comb += self.skid_valid_c.eq(Cat(*copies[:self.valid_copies]))
        copy_err = out_valid & (skid_en != in_ready) if self.ready_copy else Const(0, 1)
        for c in copies:
            copy_err = copy_err | (c != skid_valid)
        if self.ready_copy or copies:
            m.d.comb += self.copy_error.eq(copy_err)
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
        errs = []  # copy_error's terms
        if self.ready_copy:  # each slot's enable its own flip-flop (s.ready & wp == k, a cycle ahead)
            en = [Signal(init=1, name="slot_en0"), Signal(init=0, name="slot_en1")]
            m.d.sync += [en[0].eq(ready_n & ~wp_n), en[1].eq(ready_n & wp_n)]
            errs.append((en[0] != (in_ready & ~wp)) | (en[1] != (in_ready & wp)))
        else:
            en = [in_ready & ~wp, in_ready & wp]
        if self.valid_copy:  # m.valid's copy, from its own state (module docstring)
            valid_c = Signal(name="out_valid_c")
            m.d.sync += valid_c.eq(push | (valid_c & ~(o.ready & in_ready)))
            m.d.comb += self.m_valid_c.eq(valid_c)
            errs.append(valid_c != out_valid)
        if errs:
            m.d.comb += self.copy_error.eq(errs[0] if len(errs) == 1 else errs[0] | errs[1])
        for k in range(2):  # the free slot the next beat goes to copies the input, beat or not
            with m.If(en[k]):
                m.d.sync += slots[k].eq(s.payload)
        return m
