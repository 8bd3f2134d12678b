"""On-chip slot store (hdl/onchip_slot_store.py) against the reference of the slot-store
interface (sim/slot_store_model.py: the golden model's saturating int32 add): random ops, rows
and lane masks, random valid on ``cmd`` and ready on ``rsp``, rows hit again 1, 2 and 3
commands later (every forward); one response per command, in order; 1 command per cycle;
one block-RAM copy."""

from __future__ import annotations

import random
import re

import pytest
from amaranth.back import rtlil
from stream_helpers import Port, drive_random, pack, unpack

from wanreduce.hdl.onchip_slot_store import OnChipSlotStore
from wanreduce.hdl.slot_store_signature import Op, cmd_layout, rsp_layout
from wanreduce.sim.slot_store_model import SlotStoreModel, row_of

EXTREMES = [-(2**31), 2**31 - 1, 2**30, -(2**30), 1, -1]


def _commands(store: OnChipSlotStore, n: int, rng: random.Random) -> list[dict]:
    lanes, rows, out, row = store.data_width // 32, store.rows, [], 0
    for k in range(n):
        if rng.random() < 0.6:  # clustered: the same row again, or a neighbour, soon after
            row = (row + rng.choice([0, 0, 1, -1])) % rows
        else:
            row = rng.randrange(rows)
        data = row_of([rng.choice(EXTREMES) if rng.random() < 0.4 else rng.randint(-999, 999)
                       for _ in range(lanes)])
        op = rng.choice([Op.WRITE, Op.ADD, Op.ADD, Op.ADD, Op.READ])
        out.append({"op": int(op), "row": row, "data": data, "lanes": rng.getrandbits(lanes), "tag": k})
    return out


def _run(width: int, slots: int, row_bits: int, n: int, p_valid: float, p_ready: float, seed: int):
    store = OnChipSlotStore(width, slots=slots, row_bits=row_bits)
    cmds = _commands(store, n, random.Random(seed))
    cl = cmd_layout(width, store.address_bits)
    run = drive_random(store, Port.of(store.cmd), [Port.of(store.rsp)], [pack(cl, c) for c in cmds],
                       p_valid=p_valid, p_ready=p_ready, seed=seed)
    return store, cmds, run


@pytest.mark.parametrize(("width", "slots", "row_bits", "p_valid", "p_ready", "seed"), [
    (64, 4, 1, 0.9, 0.5, 1), (64, 2, 0, 1.0, 1.0, 2), (128, 8, 2, 0.5, 0.9, 3),
    (256, 4, 2, 1.0, 0.3, 4), (512, 2, 1, 0.7, 0.7, 5),
])
def test_equals_reference_under_backpressure(width, slots, row_bits, p_valid, p_ready, seed) -> None:
    store, cmds, run = _run(width, slots, row_bits, 400, p_valid, p_ready, seed)
    model = SlotStoreModel(width, initial=lambda row: 0)  # (the simulator's memory starts at 0)
    rl = rsp_layout(width)
    got = [unpack(rl, v) for v in run.received[0]]
    assert len(got) == len(cmds), f"{len(got)} responses to {len(cmds)} commands"
    for c, r in zip(cmds, got, strict=True):
        data, overflow = model.apply(c["op"], c["row"], c["data"], c["lanes"])
        assert (r.tag, r.data, r.overflow) == (c["tag"], data, overflow), f"command {c['tag']}: {c}"


def test_one_command_per_cycle() -> None:
    """cmd always valid, rsp always ready: n commands in n + 3 cycles (the pipeline's latency)."""
    n = 200
    _, _, run = _run(64, 4, 1, n, 1.0, 1.0, 7)
    assert run.cycles == n + 3


def test_one_memory_copy_with_one_read_port() -> None:
    """The rows live in one memory with one read and one write port (no copy for a second
    reader), the premise of 'every block RAM of the store holds sums'."""
    text = rtlil.convert(OnChipSlotStore(64, slots=16, row_bits=4), name="store")
    mems = [line for line in text.splitlines() if line.strip().startswith("memory ")]
    assert len(mems) == 2  # the rows and the response FIFO's storage
    assert len(re.findall(r"cell \$memrd\S* ", text)) == 2  # one read port per memory
    assert len(re.findall(r"cell \$memwr\S* ", text)) == 2


@pytest.mark.parametrize(("kw", "msg"), [({"row_bits": 13}, r"row_bits must be 0\.\.12, got 13"),
                                         ({"slots": 3}, r"slots must be a power of two")])
def test_rejects_bad_parameters(kw, msg) -> None:
    with pytest.raises(ValueError, match=msg):
        OnChipSlotStore(64, **{"slots": 4, "row_bits": 1, **kw})
