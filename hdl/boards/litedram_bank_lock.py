"""A fix for LiteDRAM 2024.12's bank lock with a buffered command buffer (``cmd_buffer_buffered``).

LiteDRAM's crossbar keeps a port's commands in order by letting one bank machine at a time hold
them: a bank machine raises ``lock`` while it holds a command of the port, and no other bank's
arbiter grants that port meanwhile. ``BankMachine`` computes ``lock`` as
``cmd_buffer_lookahead.source.valid | cmd_buffer.source.valid``. With
``cmd_buffer_buffered=True`` (the Versa's controller setting, for timing) the lookahead FIFO is
Migen's ``SyncFIFOBuffered``: a command accepted at cycle t reaches its output register only at
t + 2, so at t + 1 the bank holds it with ``lock`` low. The port's next command, to another bank,
is then granted there, the two bank machines run them in either order, and the port's read data
and write data (returned and taken in command order) go to the wrong commands: reads return
another address's data, writes land at another address. Found by the slot-store bench through
the controller (``sim/tb_slot_store_litedram.py``; docs/boards.md, "Simulating the real
controller"). Unbuffered FIFOs show their head the cycle after a write, which is why the default
setting is correct.

:func:`fixed_bank_lock` patches ``BankMachine`` while LiteDRAM is elaborated: ``lock`` is raised
exactly while the bank holds a command (in the lookahead FIFO, its output register included, or
in the one-entry buffer after it). It is a flip-flop: a registered count of the commands held
(+1 for each the lookahead FIFO accepts, -1 for each leaving the buffer) and ``lock`` = "the
count will be non-zero", registered with it. An earlier version computed it combinationally from
the FIFO's ``level`` (an adder: the FIFO's count plus its output register) and put that adder in
front of the crossbar's arbiters (88.2 MHz in one placement of the Versa store design).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .litedram_patching import after_init

__all__ = ["fixed_bank_lock"]


@contextlib.contextmanager
def fixed_bank_lock() -> Iterator[None]:
    """While active, every ``litedram.core.bankmachine.BankMachine`` built gets the fixed
    ``lock`` (a later assignment of ``req.lock``, which overrides LiteDRAM's, from a flip-flop)."""
    from litedram.core import bankmachine
    from litex.soc.interconnect import stream
    from migen import Signal

    def fix(self, *args, **kwargs) -> None:
        subs = [m for _, m in self._submodules]
        fifos = [m for m in subs if isinstance(m, stream.SyncFIFO)]
        buffers = [m for m in subs if isinstance(m, stream.Buffer)]
        if len(fifos) != 1 or len(buffers) != 1:  # LiteDRAM changed: do not guess
            raise RuntimeError(f"BankMachine has {len(fifos)} SyncFIFO and {len(buffers)} Buffer "
                               f"submodules, expected one each: review litedram_bank_lock.py")
        fifo, buf = fifos[0], buffers[0]
        held = Signal(max=fifo.depth + 3)  # commands in the FIFO (output register too) + buffer
        lock = Signal()  # == (held != 0), a flip-flop
        taken = fifo.sink.valid & fifo.sink.ready
        left = buf.source.valid & buf.source.ready
        held_next = Signal.like(held)
        self.comb += [held_next.eq(held + taken - left), self.req.lock.eq(lock)]
        self.sync += [held.eq(held_next), lock.eq(held_next != 0)]

    with after_init(bankmachine.BankMachine, fix):
        yield
