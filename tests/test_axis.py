"""AXIStreamSignature (hdl/axis.py): members, widths, equality, connection checks."""

from __future__ import annotations

import pytest
from amaranth.hdl import Fragment, Module, Shape
from amaranth.lib import wiring

from wanreduce.hdl.axis import AXIStreamSignature


def test_signature_members_and_equality() -> None:
    sig = AXIStreamSignature(256, user_width=4)
    widths = {name: (member.flow, Shape.cast(member.shape).width) for name, member in sig.members.items()}
    assert widths == {
        "tdata": (wiring.Out, 256),
        "tkeep": (wiring.Out, 32),
        "tlast": (wiring.Out, 1),
        "tuser": (wiring.Out, 4),
        "tvalid": (wiring.Out, 1),
        "tready": (wiring.In, 1),
    }
    assert sig == AXIStreamSignature(256, 4)
    assert sig != AXIStreamSignature(256, 1)
    assert sig != AXIStreamSignature(128, 4)
    assert sig != sig.flip()


@pytest.mark.parametrize("width", [0, 4, 12, 1032, 2048, -8, 64.0, True, "64"])
def test_signature_rejects_bad_data_width(width: object) -> None:
    with pytest.raises(ValueError, match=r"data_width must be a multiple of 8 between 8 and 1024"):
        AXIStreamSignature(width)  # type: ignore[arg-type]


@pytest.mark.parametrize("width", [0, -1, 1025])
def test_signature_rejects_bad_user_width(width: int) -> None:
    with pytest.raises(ValueError, match=r"user_width must be an integer between 1 and 1024"):
        AXIStreamSignature(64, width)


def test_connect_requires_equal_widths() -> None:
    source = AXIStreamSignature(64, 2).create()
    m = Module()
    wiring.connect(m, source, AXIStreamSignature(64, 2).flip().create())
    with pytest.raises(wiring.ConnectionError):
        wiring.connect(m, source, AXIStreamSignature(128, 2).flip().create())
    with pytest.raises(wiring.ConnectionError):
        wiring.connect(m, source, AXIStreamSignature(64, 1).flip().create())
    Fragment.get(m, None)  # elaborate, so Amaranth does not warn about an unused module


