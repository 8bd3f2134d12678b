"""First-word-fall-through FIFO in LUT RAM whose writer keeps its own count of room.

Amaranth's ``SyncFIFO`` gates its write with ``w_rdy`` (``level != depth``) and keeps one
``level`` register updated from both enables, so the level feeds the LUT RAM's write enable and
both enables feed the level: a loop (``level`` -> ``w_rdy`` -> write -> ``level``) on the
ingress parser's descriptor FIFO that limited placements of the core (docs/benchmarks.md,
branch fmax5). Here the write and read pointers (with a wrap bit) are the only state: a write
is never refused (the writer must know there is room, from ``level``, e.g. a registered
compare) and a read is only asked for when ``r_rdy``: each pointer's enable is its own side's
``en`` alone, and ``level``/``r_rdy`` are
derived from the two pointers. Cycle for cycle it behaves like ``SyncFIFO(fwft=True)`` as long
as no write meets a full FIFO: ``r_rdy`` rises, ``level`` counts and ``r_data`` shows an entry
in the cycle after its write.

With ``registered_head=True`` ``r_data`` comes from a register instead of the LUT RAM's read
multiplexer, and ``r_rdy`` from a flip-flop, so logic that decodes the head and decides ``r_en``
starts from flip-flops; still cycle for cycle ``SyncFIFO(fwft=True)``. The LUT RAM is read at
``consume + 1`` (a flip-flop copy), so ``r_en`` reaches no adder, comparator or read address:
it only picks the head's next value, the entry after the head (``w_data`` if that is being
written now) when it reads, else the head (``w_data`` if the FIFO is empty). ``copy_error``:
a flip-flop copy disagrees with what it copies (never, if the design is right).

With ``registered_one=True`` as well (the Versa DRAM build's command port, hdl/command_arbiter.py)
the "exactly one entry" flag that picks the head's next value is a flip-flop too, worked out a
cycle ahead from the pointers and both enables: the pointers' 6-bit compare no longer runs on
into every head bit's multiplexer (9.12 ns, docs/benchmarks.md, session 34). Off by default: the
on-chip core's RTL is unchanged.

With ``lazy_head=True`` as well (the DRAM core's ingress parsers, docs/benchmarks.md session 42)
``r_en`` picks no head bit's next value: two registers load every cycle, ``head`` with the head
as it is now (``w_data`` into an empty FIFO) and ``nxt`` with the entry after it (``w_data`` if
that is being written now), and ``r_data`` is ``nxt`` in the cycle after a read (``popped``, a
flip-flop), else ``head``. So the reader's ready, which decides ``r_en``, reaches ``consume``,
``rdy``, ``popped`` and no wide select (``m_msg.ready`` -> ``r_en`` -> the descriptor head's 100+
multiplexers, 11.87 ns at session 42's seed 5); ``r_data`` is one 2:1 multiplexer behind
flip-flops. The same values cycle for cycle. ``r_last`` is ``head``: in the cycle after a read
it holds the entry read (a reader registering the head it read can use it instead).

With ``lazy_head`` and ``registered_one`` together (the DRAM core's parsers, docs/benchmarks.md
session 43) ``nxt``'s select is the flip-flop ``one`` alone: ``w_data`` whenever exactly one
entry is held, written or not. Without a write that value is never shown: ``nxt`` is shown only
after a read, and reading the one entry empties the FIFO (``r_rdy`` low). So no pointer compare
and no write enable sits in front of ``nxt``'s 150+ multiplexers (``consume_n`` / ``produce`` ->
``produce == consume_n`` -> ``w_en & one`` -> every ``nxt`` bit, 9.90 ns at session 42's seed 1);
what is left in its cone is the LUT RAM's read at ``consume_n`` and ``w_data``.
``r_data_next`` is then meaningful only with ``r_rdy_next``.

With ``free_head=True`` (with ``registered_head``; the DRAM core's parsers, docs/benchmarks.md
session 45) the head register loads ``w_data`` in every cycle the FIFO is empty (``~r_rdy``),
written or not, instead of only when written: its select is the flip-flop ``rdy`` alone, so the
write enable reaches no head bit (``v_push`` -> ``w_en & ~rdy`` -> ``desc_fifo.r_last``, the
head, 8.32-8.56 ns at session 44's seeds 1 / 2). Nothing reads the head while the FIFO is empty
(``r_data`` / ``r_data_next`` only with ``r_rdy`` / ``r_rdy_next``; with ``lazy_head``
``r_last`` only in the cycle after a read, and the read loads the head with the entry read
before it can go empty), and the first write into an empty FIFO loads it as before: the same
values wherever they are read.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["UnguardedFIFO"]


class UnguardedFIFO(wiring.Component):
    """FWFT FIFO of ``depth`` (a power of two, 2 or more) ``width``-bit entries; no full check.

    Ports: ``w_data``/``w_en`` (write; the caller guarantees ``level < depth`` when ``w_en``),
    ``r_data``/``r_rdy``/``r_en`` (read; ``r_en`` only with ``r_rdy``), ``level``
    (entries held, from the pointers). ``registered_head``: ``r_data`` and ``r_rdy`` from
    flip-flops (``copy_error``: one of their copies is wrong; always 0 without it), and their
    next values ``r_data_next``/``r_rdy_next`` out, so a reader can register what it decodes
    from the head a cycle ahead (0 without it). ``registered_one``, ``lazy_head``, ``free_head``: module docstring;
    with ``lazy_head`` also ``r_last`` (out): in the cycle after a read, the entry read.
    """

    def __init__(self, width: int, depth: int, *, registered_head: bool = False,
                 registered_one: bool = False, lazy_head: bool = False, free_head: bool = False) -> None:
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be a positive integer, got {width!r}")
        if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
            raise ValueError(f"depth must be a power of two >= 2, got {depth!r}")
        if registered_one and not registered_head:
            raise ValueError("registered_one needs registered_head=True, got registered_head=False")
        if lazy_head and not registered_head:
            raise ValueError("lazy_head needs registered_head=True, got registered_head=False")
        if free_head and not registered_head:
            raise ValueError("free_head needs registered_head=True, got registered_head=False")
        self.width, self.depth, self.registered_head = width, depth, registered_head
        self.registered_one, self.lazy_head, self.free_head = registered_one, lazy_head, free_head
        super().__init__({
            "w_data": In(width),
            "w_en": In(1),
            "r_data": Out(width),
            "r_rdy": Out(1),
            "r_en": In(1),
            "level": Out(range(depth + 1)),
            "r_data_next": Out(width),
            "r_rdy_next": Out(1),
            "copy_error": Out(1),
            **({"r_last": Out(width)} if lazy_head else {}),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        aw = self.depth.bit_length() - 1
        m.submodules.storage = mem = Memory(shape=self.width, depth=self.depth, init=[])
        wp = mem.write_port()
        rp = mem.read_port(domain="comb")
        produce = Signal(aw + 1)  # next write address, with a wrap bit
        consume = Signal(aw + 1)  # next read address, with a wrap bit
        m.d.comb += [
            wp.addr.eq(produce[:aw]), wp.data.eq(self.w_data), wp.en.eq(self.w_en),
            self.level.eq((produce - consume)[:aw + 1]),
        ]
        with m.If(self.w_en):
            m.d.sync += produce.eq(produce + 1)
        with m.If(self.r_en):
            m.d.sync += consume.eq(consume + 1)
        if not self.registered_head:
            m.d.comb += [rp.addr.eq(consume[:aw]), self.r_data.eq(rp.data), self.r_rdy.eq(produce != consume)]
            return m
        # registered head (module docstring): the entry after the head is read at consume_n
        # (consume + 1, a copy) and r_rdy is a flip-flop (rdy, a copy of produce != consume);
        # one: exactly one entry (the head) is held
        head = Signal(self.width)
        consume_n = Signal(aw + 1, init=1)
        rdy = Signal()
        one = Signal()
        copy_error = (rdy != (produce != consume)) | (consume_n != (consume + 1)[:aw + 1])
        one_now = produce == consume_n
        if self.registered_one:  # a flip-flop: the pointers' compare after this cycle's enables
            m.d.sync += one.eq(Mux(self.r_en, Mux(self.w_en, one, produce == (consume_n + 1)[:aw + 1]),
                                   Mux(self.w_en, (produce + 1)[:aw + 1] == consume_n, one)))
            copy_error = copy_error | (one != one_now)
        else:
            m.d.comb += one.eq(one_now)
        cur = head  # the head now (with lazy_head: nxt in the cycle after a read, module docstring)
        if self.lazy_head:
            nxt, popped = Signal(self.width, name="nxt"), Signal(name="popped")
            cur = Mux(popped, nxt, head)
        m.d.comb += [rp.addr.eq(consume_n[:aw]), self.r_data.eq(cur), self.r_rdy.eq(rdy),
                     self.copy_error.eq(copy_error)]
        with m.If(self.r_en):
            m.d.sync += consume_n.eq(consume_n + 1)
        # the head's next value if it is read now (the entry after it) and if not; with lazy_head
        # and registered_one picked by the flip-flop one alone (module docstring)
        bypass = one if self.lazy_head and self.registered_one else self.w_en & one
        after = Mux(bypass, self.w_data, rp.data)
        # (free_head: w_data whenever empty, written or not; module docstring)
        stays = Mux(~rdy if self.free_head else self.w_en & ~rdy, self.w_data, cur)
        m.d.comb += [
            self.r_rdy_next.eq(self.w_en | (rdy & ~(self.r_en & one))),
            self.r_data_next.eq(Mux(self.r_en, after, stays)),
        ]
        if self.lazy_head:  # both registered, popped (r_en a cycle late) picks
            m.d.sync += [rdy.eq(self.r_rdy_next), head.eq(stays), nxt.eq(after), popped.eq(self.r_en)]
            m.d.comb += self.r_last.eq(head)  # the entry read, in the cycle after a read
        else:
            m.d.sync += [rdy.eq(self.r_rdy_next), head.eq(self.r_data_next)]
        return m
