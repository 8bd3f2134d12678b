"""LiteDRAM 2024.12's refresh request to the bank machines from a flip-flop (timing).

LiteDRAM's multiplexer drives every bank machine's ``refresh_req`` with the refresher's
``cmd.valid``, a combinational output of the refresher's FSM (and of the ZQCS timer's 27-bit
``count == 0``). In a bank machine's ``REGULAR`` state ``refresh_req`` gates ``cmd.valid``, so
the request ran on through the bank machines' commands, the multiplexer's choice (``tccdcon``)
and the chosen bank's ``ready`` into every bank machine's command FIFO: the Versa DRAM build's
controller-clock critical path, 12.65 ns against 11.43 (87.5 MHz), and with the refresher's
paths left out the worst was 11.41 ns (docs/benchmarks.md, branch vdram21).

:func:`registered_refresh_request` patches ``BankMachine`` while LiteDRAM is elaborated: its FSM
sees the request one cycle late, from a flip-flop, and its ``refresh_gnt`` is raised only while
the live request (``cmd.valid``) is still up. Why this is the same controller:

* **rising**: a bank machine enters ``REFRESH`` one cycle later (it may still issue one command
  in that cycle, as if the refresh timer had fired a cycle later); the refresher waits for the
  multiplexer, which waits for every bank's grant, as before;
* **falling**: the refresher drops ``cmd.valid`` with ``cmd.last`` and the multiplexer leaves
  its ``REFRESH`` state; the bank machines leave theirs a cycle later than before (they issue
  nothing there). Their grant is cut with the live request, so the multiplexer does not see
  every bank granting in that cycle and re-enter ``REFRESH`` with no refresh to run.

So the multiplexer's ``go_to_refresh`` (an AND of the grants) still follows ``cmd.valid``, but
only into its own state register; no bank machine's command depends on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .litedram_patching import after_init

__all__ = ["registered_refresh_request"]


@contextlib.contextmanager
def registered_refresh_request() -> Iterator[None]:
    """While active, every ``litedram.core.bankmachine.BankMachine`` built takes ``refresh_req``
    through a flip-flop and gates ``refresh_gnt`` with the live request (see the module
    docstring). The ports keep their names: the multiplexer drives and reads them unchanged."""
    from litedram.core import bankmachine
    from migen import Signal

    def register(self, *args, **kwargs) -> None:
        seen_req, own_gnt = self.refresh_req, self.refresh_gnt  # what the FSM reads / drives
        self.refresh_req, self.refresh_gnt = Signal(), Signal()  # the ports, as the mux sees them
        self.sync += seen_req.eq(self.refresh_req)
        self.comb += self.refresh_gnt.eq(own_gnt & self.refresh_req)

    with after_init(bankmachine.BankMachine, register):
        yield
