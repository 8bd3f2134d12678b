"""bench/bench_dram.py's command order (``slot_traffic``): without records the order the figures
in docs/benchmarks.md were measured with; with records (docs/large_slots.md, "The record
store") one record read and one record write per slot, each its own burst, where the design puts
them, and the steady-state window around the same slots; the controller it simulates."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "bench_dram", Path(__file__).resolve().parents[1] / "bench" / "bench_dram.py")
bench_dram = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench_dram)


def _before_records(slots: int, beats: int, group: int) -> list[tuple[int, int]]:
    """The order as bench_dram.py built it before ``--records`` (commit 3dc5be1)."""
    order = []
    for k in range(slots + 1):
        for g in range(0, beats, group):
            if k < slots:
                order += [(0, k * beats + i) for i in range(g, g + group)]
            if k:
                order += [(1, (k - 1) * beats + i) for i in range(g, g + group)]
    return order


@pytest.mark.parametrize(("slots", "beats", "group"), [(8, 128, 32), (8, 32, 8), (8, 32, 32), (3, 128, 128)])
def test_no_records_is_the_measured_order(slots: int, beats: int, group: int) -> None:
    order, window = bench_dram.slot_traffic(slots, beats, group)
    assert order == _before_records(slots, beats, group)
    assert window == (beats, len(order) - beats)


def _bursts(order):
    """Runs of one direction: [(we, [addresses])] (with ``append`` a record read may follow the
    previous slot's last data read: one read run)."""
    out = []
    for we, a in order:
        if out and out[-1][0] == we:
            out[-1][1].append(a)
        else:
            out.append((we, [a]))
    return out


@pytest.mark.parametrize("records", ["dense", "stride", "append"])
def test_records_one_read_and_one_write_per_slot(records: str) -> None:
    slots, beats, group, rec, base = 6, 32, 8, 2, 1 << 20
    order, (lo, hi) = bench_dram.slot_traffic(slots, beats, group, records, rec, base)
    plain, _ = bench_dram.slot_traffic(slots, beats, group)
    assert len(order) == len(plain) + 2 * slots * rec
    for k in range(slots):
        addrs = (list(range(base + k * rec, base + (k + 1) * rec)) if records == "dense"
                 else list(range((k + 1) * beats - rec, (k + 1) * beats)))
        at = [i for i in range(len(order) - rec + 1)
              if [a for _, a in order[i:i + rec]] == addrs]
        kinds = sorted({tuple(we for we, _ in order[i:i + rec]) for i in at})
        assert kinds == [(0,) * rec, (1,) * rec], (k, kinds)
    # the arbiter's alternation: in the steady state each run of one direction is one burst, a
    # record access one of its own (a turnaround each); with append the record write is in the
    # last data write burst and the next record read follows the last data read
    runs = _bursts(order[lo:hi])
    sizes = (group, group + rec) if records == "append" else (group, rec)
    if records == "append":  # the record write inside the slot's last data write burst
        assert sum(len(a) == group + rec for we, a in runs if we) == slots - 1
    assert all(len(a) in sizes or (not we and len(a) in (rec, rec + group)) for we, a in runs), \
        [(we, len(a)) for we, a in runs]
    # the window: the slots 1 .. slots-1's reads and 0 .. slots-2's writes, and their records
    assert hi - lo == 2 * (slots - 1) * (beats + rec)


def test_records_rejects_an_unknown_placement() -> None:
    with pytest.raises(ValueError, match="records must be one of none, dense, stride, append, got 'row'"):
        bench_dram.slot_traffic(2, 8, 4, "row")


def test_controller_is_built_with_the_boards_patches() -> None:
    """The bench simulates the controller the boards build: the same ``litedram_patches()`` (bank
    lock and registered refresh request), not a list of its own."""
    from wanreduce.hdl.boards import litedram_controller

    assert bench_dram.litedram_patches is litedram_controller.litedram_patches
