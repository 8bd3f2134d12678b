"""LiteDRAM 2024.12's bank-machine row hit from a flip-flop (timing).

``BankMachine`` compares the open row with the row of the command at the head of its command
buffer combinationally: ``row_hit = row == slicer.row(cmd_buffer.source.addr)``. The hit decides
the bank's command (``cmd.valid``, read / write / precharge), the multiplexer's choice among the
eight banks, and the chosen bank's ``ready`` back into every bank's command buffer and FSM: the
Versa DRAM build's controller-clock critical path (12.44 ns against 11.43 at 87.5 MHz in
session 43's seed 2, the row compare alone 3.8 ns of it: docs/benchmarks.md).

:func:`registered_row_hit` patches ``BankMachine`` while LiteDRAM is elaborated: ``row_hit`` is a
flip-flop holding exactly the value the compare would have in the next cycle, so the controller
is the same cycle for cycle. Both operands are registers whose next values are known a cycle
ahead:

* the open row ``row`` takes the buffered command's row when the bank opens one
  (``row_open & ~row_close``) and holds otherwise;
* the buffer's address (``stream.Buffer``, a ``PipeValid``) loads the lookahead FIFO's head when
  its sink is ready and holds otherwise.

So the next hit is one of three compares between registers (FIFO head's row vs buffer's row,
FIFO head's row vs ``row``, buffer's row vs ``row``; the fourth case, open and hold, is 1),
selected by the two late conditions after the compares. Reset: ``row`` and the buffer reset to
0, so the hit resets to 1 as the compare does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .litedram_patching import after_init

__all__ = ["registered_row_hit"]


def _named(sig: object, name: str) -> bool:
    bt = getattr(sig, "backtrace", None)
    return bool(bt) and bt[-1][0] == name


@contextlib.contextmanager
def registered_row_hit() -> Iterator[None]:
    """While active, every ``litedram.core.bankmachine.BankMachine`` built computes ``row_hit``
    as a flip-flop (see the module docstring); its FSM reads the same signal."""
    from litedram.core import bankmachine
    from litex.soc.interconnect import stream
    from migen import If, Mux, Signal
    from migen.fhdl.structure import _Assign, _Operator, _Slice

    def review(what: str) -> RuntimeError:  # LiteDRAM changed: do not guess
        return RuntimeError(f"BankMachine: {what}: review litedram_row_hit.py")

    def register(self, *args, **kwargs) -> None:
        comb = self._fragment.comb
        hits = [i for i, s in enumerate(comb) if isinstance(s, _Assign) and _named(s.l, "row_hit")]
        if len(hits) != 1:
            raise review(f"{len(hits)} assignments of row_hit")
        stmt = comb[hits[0]]
        eq = stmt.r
        if not (isinstance(eq, _Operator) and eq.op == "==" and len(eq.operands) == 2
                and isinstance(eq.operands[1], _Slice)):
            raise review("row_hit is not row == slicer.row(addr)")
        row, buf_slice = eq.operands
        subs = [m for _, m in self._submodules]
        fifos = [m for m in subs if isinstance(m, stream.SyncFIFO)]
        buffers = [m for m in subs if isinstance(m, stream.Buffer)]
        if len(fifos) != 1 or len(buffers) != 1 or buf_slice.value is not buffers[0].source.addr:
            raise review("command buffer not found as expected")
        fifo, buf = fifos[0], buffers[0]
        # the row register's update: If(row_close, ...).Elif(row_open, row.eq(...)) in sync
        updates = [s for s in self._fragment.sync.get("sys", []) if isinstance(s, If)
                   and _named(s.cond, "row_close") and len(s.f) == 1 and isinstance(s.f[0], If)
                   and _named(s.f[0].cond, "row_open")]
        if len(updates) != 1:
            raise review("row update If(row_close).Elif(row_open) not found")
        row_close, row_open = updates[0].cond, updates[0].f[0].cond
        lo, hi = buf_slice.start, buf_slice.stop
        fifo_row, buf_row = fifo.source.addr[lo:hi], buf.source.addr[lo:hi]
        opens = Signal()  # `row` takes buf_row at the clock edge
        load = Signal()  # the buffer takes the FIFO's head at the clock edge
        hit_r = Signal(reset=1)
        self.comb += [opens.eq(row_open & ~row_close), load.eq(buf.sink.ready)]
        self.sync += hit_r.eq(Mux(load, Mux(opens, fifo_row == buf_row, fifo_row == row),
                                  Mux(opens, 1, buf_row == row)))
        comb[hits[0]] = stmt.l.eq(hit_r)

    with after_init(bankmachine.BankMachine, register):
        yield
