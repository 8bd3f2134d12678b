"""The refresh request into LiteDRAM's bank machines from a flip-flop
(hdl/boards/litedram_refresh_request.py): a Versa bank machine (LiteDRAM's, Migen simulator)
with and without the patch."""

from __future__ import annotations

import contextlib

from wanreduce.hdl.boards.litedram_controller import DRAM_CONFIGS, controller_settings
from wanreduce.hdl.boards.litedram_model import phy_settings
from wanreduce.hdl.boards.litedram_refresh_request import registered_refresh_request

VERSA = DRAM_CONFIGS["versa-ecp5"]


def _bank_machine(*, patched: bool):
    from litedram import modules
    from litedram.core.bankmachine import BankMachine

    module = getattr(modules, VERSA.part)(VERSA.sys_clk_hz, VERSA.rate)
    s = controller_settings(VERSA)
    s.phy, s.geom, s.timing = phy_settings(VERSA), module.geom_settings, module.timing_settings
    with registered_refresh_request() if patched else contextlib.nullcontext():
        return BankMachine(0, 20, 3, 1, s)


def _trace(*, patched: bool, hold: int = 40) -> list[tuple[int, int, int]]:
    """One read: the bank activates its row (the multiplexer takes that command), then offers
    the read, which the multiplexer never takes; with the read offered, a refresh request for
    ``hold`` cycles, then none. Per cycle from the request on: (request, the bank's
    ``cmd.valid``, its ``refresh_gnt``), read after the inputs settle."""
    from migen import run_simulation

    bm = _bank_machine(patched=patched)
    seen: list[tuple[int, int, int]] = []

    def bench():
        yield bm.req.valid.eq(1)
        yield bm.req.addr.eq(5)
        yield bm.cmd.ready.eq(1)
        for _ in range(200):  # until the read is offered (after the activate and tRCD)
            yield
            if (yield bm.cmd.valid) and (yield bm.cmd.cas):
                break
        else:
            raise AssertionError("the bank never offered the read")
        yield bm.cmd.ready.eq(0)
        yield bm.req.valid.eq(0)
        for k in range(hold + 6):
            yield bm.refresh_req.eq(int(k < hold))
            yield bm.cmd.ready.eq(0)
            yield  # settle
            seen.append(((yield bm.refresh_req), (yield bm.cmd.valid), (yield bm.refresh_gnt)))

    run_simulation(bm, bench())
    return seen


def test_the_request_reaches_the_bank_a_cycle_late() -> None:
    """The cycle the request rises, the patched bank still offers its command (no combinational
    path from the refresher into the bank's command); a cycle later it withdraws it, as
    LiteDRAM's does at once."""
    before, after = _trace(patched=False), _trace(patched=True)
    assert before[0] == (1, 0, 0)  # LiteDRAM: the command drops with the request
    assert after[0][:2] == (1, 1) and after[1][1] == 0


def test_grant_only_while_the_live_request_is_up() -> None:
    """The bank grants the refresh while it is requested, issues nothing meanwhile, and never
    grants once the request has dropped: the patched bank leaves its REFRESH state a cycle
    later than LiteDRAM's (which still grants in the cycle the request drops, while the
    multiplexer, still in its own REFRESH state, is not looking), and the multiplexer, back in
    READ by then, must not see every bank granting and re-enter REFRESH with no refresh to run."""
    for patched in (False, True):
        seen = _trace(patched=patched)
        assert all(gnt for _, _, gnt in seen[2:40]), f"patched={patched}: {seen}"
        assert not any(valid for _, valid, _ in seen[1:40]), f"patched={patched}: {seen}"
        late = [k for k, (req, _, gnt) in enumerate(seen) if gnt and not req]
        assert late == ([] if patched else [40]), f"patched={patched}: {seen}"
        assert any(valid for _, valid, _ in seen[40:]), f"patched={patched}: no command after"
