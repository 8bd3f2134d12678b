"""The AXI write arbiter's "data is here" flag from a flip-flop
(hdl/boards/litedram_write_credit.py): LiteDRAM's AXI frontend (Migen simulator) on a stub
native port, with and without the patch."""

from __future__ import annotations

import contextlib
import random

import pytest

from wanreduce.hdl.boards.litedram_write_credit import registered_can_write

DW, AW = 128, 27  # the Versa controller's AXI port: data bits, byte-address bits


def _frontend(*, patched: bool):
    from litedram.common import LiteDRAMNativePort
    from litedram.frontend.axi import LiteDRAMAXI2Native, LiteDRAMAXIPort

    axi = LiteDRAMAXIPort(data_width=DW, address_width=AW, id_width=4)
    port = LiteDRAMNativePort("both", AW - 4, DW)
    with registered_can_write() if patched else contextlib.nullcontext():
        dut = LiteDRAMAXI2Native(axi, port)
    return dut, axi, port


def _run(*, patched: bool, bursts: list[int], seed: int | None, w_first: bool = False,
         w_at: int = 0, cycles: int = 3000) -> dict:
    """Write ``bursts`` (beats each) through the frontend. ``seed``: random valid/ready on AW, W
    and the command port (None: always valid/ready). ``w_at``: the first W beat is offered from
    that cycle on; ``w_first``: the first burst's address only once its data is in. The stub controller takes a write command's data 1-3
    cycles after the command and checks it is there (``wdata.valid`` whenever it pulls); and no
    write command may come before its beat has entered the buffer (LiteDRAM's own rule).
    Returns the cycles of the write commands, the data taken in order, the data sent and any
    error."""
    from migen import run_simulation

    dut, axi, port = _frontend(patched=patched)
    rng = random.Random(seed)
    busy = (lambda: rng.random() < 0.35) if seed is not None else (lambda: False)
    words = [rng.getrandbits(DW) for _ in range(sum(bursts))]
    ends = {sum(bursts[:k + 1]) - 1 for k in range(len(bursts))}  # each burst's last beat
    out: dict = {"cmds": [], "taken": [], "sent": words, "error": None, "b": 0}

    def bench():
        aw_i = w_i = 0
        pulls: list[int] = []  # the cycles at which an accepted write's data is due
        yield port.rdata.valid.eq(0)
        yield axi.b.ready.eq(1)
        for cyc in range(cycles):
            yield
            # this cycle's handshakes (inputs set before the yield, state after it)
            if (yield axi.aw.valid) and (yield axi.aw.ready):
                aw_i += 1
            if (yield port.cmd.valid) and (yield port.cmd.ready) and (yield port.cmd.we):
                out["cmds"].append(cyc)
                pulls.append(cyc + 1 + rng.randrange(3))
                if len(out["cmds"]) > w_i:  # LiteDRAM's rule: the beat is in before its command
                    out["error"] = f"cycle {cyc}: write command {len(out['cmds'])}, {w_i} beats in"
                    return
            if (yield axi.w.valid) and (yield axi.w.ready):
                w_i += 1
            if (yield port.wdata.ready):
                if not (yield port.wdata.valid):
                    out["error"] = f"cycle {cyc}: write data pulled, none in the buffer"
                    return
                out["taken"].append((yield port.wdata.data))
                pulls.pop(0)
            if (yield axi.b.valid):
                out["b"] += 1
            # the next cycle's inputs
            aw_ok = aw_i < len(bursts) and not busy() and (not w_first or w_i >= bursts[0])
            yield axi.aw.valid.eq(aw_ok)
            if aw_i < len(bursts):
                yield axi.aw.addr.eq(aw_i << 12)
                yield axi.aw.len.eq(bursts[aw_i] - 1)
                yield axi.aw.burst.eq(1)  # INCR
                yield axi.aw.size.eq(4)
                yield axi.aw.id.eq(aw_i & 15)
            w_ok = w_i < len(words) and cyc + 1 >= w_at and not busy()
            yield axi.w.valid.eq(w_ok)
            if w_i < len(words):
                yield axi.w.data.eq(words[w_i])
                yield axi.w.strb.eq((1 << DW // 8) - 1)
                yield axi.w.last.eq(int(w_i in ends))
            yield port.cmd.ready.eq(not busy())
            yield port.wdata.ready.eq(int(bool(pulls) and pulls[0] <= cyc + 1))

    run_simulation(dut, bench())
    return out


def test_a_beat_is_seen_one_cycle_later() -> None:
    """The burst's address is waiting; its only W beat arrives at cycle 20. LiteDRAM issues the
    write command in the cycle after the beat enters the buffer (its compare of the buffer's
    level, combinational); the patched frontend a cycle later, from its flip-flop."""
    before = _run(patched=False, bursts=[1], seed=None, w_at=20, cycles=60)
    after = _run(patched=True, bursts=[1], seed=None, w_at=20, cycles=60)
    assert before["error"] is None and after["error"] is None
    assert len(before["cmds"]) == len(after["cmds"]) == 1
    assert after["cmds"][0] == before["cmds"][0] + 1


def test_back_to_back_when_the_data_is_ahead() -> None:
    """With the burst's data in the buffer first, both issue its 16 write commands on 16
    consecutive cycles: the flag counts this cycle's reservation, so it costs no rate."""
    for patched in (False, True):
        res = _run(patched=patched, bursts=[16], seed=None, w_first=True, cycles=80)
        assert res["error"] is None
        c = res["cmds"]
        assert len(c) == 16 and c == list(range(c[0], c[0] + 16)), f"patched={patched}: {c}"


@pytest.mark.parametrize("seed", range(4))
def test_never_a_command_without_its_data(seed: int) -> None:
    """Random stalls on every channel and bursts of 1-16 beats: every write command comes after
    its beat entered the buffer and the beat is there when the controller pulls it, the data go out in the order they came, and every
    burst gets its B response."""
    rng = random.Random(100 + seed)
    bursts = [rng.randint(1, 16) for _ in range(40)]
    for patched in (False, True):
        res = _run(patched=patched, bursts=bursts, seed=seed, cycles=3000)
        assert res["error"] is None, f"patched={patched}: {res['error']}"
        assert res["taken"] == res["sent"], f"patched={patched}"
        assert res["b"] == len(bursts), f"patched={patched}: {res['b']} B of {len(bursts)}"
