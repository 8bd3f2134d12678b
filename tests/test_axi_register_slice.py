"""AxiRegisterSlice (hdl/axi_register_slice.py): a skid buffer on each AXI4 channel.

Amaranth simulator: on every channel, in its own direction, every beat comes out once and in
order under random valid/ready, a stalled output holds its beat, and no output moves when only
inputs change (every output from a flip-flop); one beat per cycle with one cycle of latency.
"""

from __future__ import annotations

import pytest
from amaranth.hdl import Cat
from stream_helpers import Port, drive_random

from wanreduce.hdl.axi4 import axi4_payload, axi4_port
from wanreduce.hdl.axi_register_slice import AxiRegisterSlice

WIDTHS = dict(addr_width=27, data_width=128, id_width=4)
CHANNELS = ("aw", "w", "b", "ar", "r")


def _port(side, ch: str) -> Port:
    fields = axi4_payload(**WIDTHS)[ch]
    return Port(getattr(side, f"{ch}valid"), getattr(side, f"{ch}ready"),
                Cat(*(getattr(side, name) for name in fields)))


def _run(ch: str, p_valid: float, p_ready: float, seed: int, n: int = 120):
    import random

    dut = AxiRegisterSlice(**WIDTHS)
    s, o = axi4_port(dut, "s_axi"), axi4_port(dut, "m_axi")
    src, dst = (s, o) if ch in ("aw", "w", "ar") else (o, s)
    rng = random.Random(seed)
    source = _port(src, ch)
    beats = [rng.getrandbits(len(source.payload)) for _ in range(n)]
    run = drive_random(dut, source, [_port(dst, ch)], beats, p_valid=p_valid, p_ready=p_ready,
                       seed=seed)
    return beats, run.received[0], run.cycles


@pytest.mark.parametrize("ch", CHANNELS)
@pytest.mark.parametrize(("p_valid", "p_ready", "seed"), [(0.5, 0.5, 1), (0.9, 0.3, 2), (0.3, 0.9, 3)])
def test_every_beat_once_in_order_from_flip_flops(ch, p_valid, p_ready, seed) -> None:
    beats, received, cycles = _run(ch, p_valid, p_ready, seed)
    assert cycles > 0, f"{ch}: only {len(received)} of {len(beats)} beats came out"
    assert received == beats


@pytest.mark.parametrize("ch", CHANNELS)
def test_one_beat_per_cycle_one_cycle_late(ch) -> None:
    beats, received, cycles = _run(ch, 1.0, 1.0, 4, n=50)
    assert received == beats and cycles == 51


@pytest.mark.parametrize(("kw", "field"), [(dict(data_width=96), "data_width"),
                                           (dict(addr_width=0), "addr_width"),
                                           (dict(id_width=0), "id_width")])
def test_bad_widths_are_one_line_errors(kw, field) -> None:
    with pytest.raises(ValueError, match=field):
        AxiRegisterSlice(**{**WIDTHS, **kw})
