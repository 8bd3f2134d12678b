"""LiteDRAM 2024.12's AXI write arbiter's "data is here" flag from a flip-flop (timing).

LiteDRAM's AXI frontend (``LiteDRAMAXI2NativeW``) issues a write command only while its W buffer
holds a beat no command has reserved yet: ``can_write = w_buffer.level > w_buffer_level`` (the
FIFO's level, an adder of its count and output register, compared with the count of reserved
beats). That compare ran on through the read/write grant, the burst-to-beat counter and the AW
ready into the write ID buffer and the native command slice: the Versa DRAM build's
controller-clock critical path at main 73046b7's seed-1 placement, 12.10 ns against 11.43
(87.5 MHz), 5.2 ns of it before the grant (docs/benchmarks.md, session 35).

:func:`registered_can_write` patches ``LiteDRAMAXI2NativeW`` while LiteDRAM is elaborated:
``can_write`` is a flip-flop set from this cycle's values, counting this cycle's reservation but
not this cycle's new W beat, ``level > reserved + queued``. Why this is never wrong: write the
unreserved beats ``D = level - reserved``; a cycle changes it by ``+ pushed - queued`` (a beat
leaving the buffer leaves both counts), so ``D(t+1) >= D(t) - queued(t)``: the flag, set at
``t + 1`` from ``D(t) - queued(t) > 0``, implies LiteDRAM's own ``D(t+1) > 0``. A command is never
issued without its data; a beat arriving is seen one cycle later than before (one cycle of
latency on a write whose data comes last; the rate of commands is still that of the W beats).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .litedram_patching import after_init

__all__ = ["registered_can_write"]


@contextlib.contextmanager
def registered_can_write() -> Iterator[None]:
    """While active, every ``litedram.frontend.axi.LiteDRAMAXI2NativeW`` built drives its
    ``can_write`` from a flip-flop (see the module docstring); without read-modify-write only."""
    from litedram.frontend import axi
    from migen import Signal
    from migen.fhdl.structure import _Assign, _Operator

    def register(self, axi_port, port, buffer_depth, base_address, with_read_modify_write=False) -> None:
        if with_read_modify_write:  # its FSM also drives can_write: not covered by the argument
            raise RuntimeError("registered_can_write: with_read_modify_write is not supported")
        comb = self._fragment.comb
        found = [s for s in comb if isinstance(s, _Assign) and isinstance(s.r, _Operator)
                 and s.r.op == ">" and s.l.backtrace[-1][0] == "can_write"]
        if len(found) != 1:  # LiteDRAM changed: do not guess
            raise RuntimeError(f"LiteDRAMAXI2NativeW has {len(found)} 'can_write = level > "
                               f"reserved' assignments, expected one: review litedram_write_credit.py")
        stmt = found[0]
        level, reserved = stmt.r.operands
        comb.remove(stmt)
        flag = Signal()
        queued = port.cmd.valid & port.cmd.ready & port.cmd.we  # LiteDRAM's w_buffer_queue
        self.comb += stmt.l.eq(flag)
        self.sync += flag.eq(level > reserved + queued)

    with after_init(axi.LiteDRAMAXI2NativeW, register):
        yield
