"""Checks shared by the board-build tests."""

from __future__ import annotations

import re


def assert_core_reset_by_gsr(top: str, top_name: str) -> None:
    """The Versa top's core clock domain has no fabric reset: the core module has no reset
    input and the chip's global set/reset (``SGSR``) is driven by the two synchroniser
    flip-flops kept off the GSR (or an asserted GSR would hold them, and itself, forever)."""
    core_mod = re.search(rf"\nmodule \\{top_name}\.core\n(.*?)\nend\n", top, re.S).group(1)
    inputs = set(re.findall(r"wire width 1 input \d+ +\\(\w+)", core_mod))
    assert "clk" in inputs and not any("rst" in i for i in inputs), inputs
    sgsr = re.search(r"cell \\SGSR \\gsr\n(.*?)\n\s*end\n", top, re.S)
    assert sgsr and "connect \\GSR \\gsr_run1" in sgsr.group(1), sgsr
    for ff in ("gsr_sync0", "gsr_sync1"):
        cell = re.search(rf"cell \\FD1S3AX \\{ff}\n(.*?)\n\s*end\n", top, re.S)
        assert cell and 'parameter \\GSR "DISABLED"' in cell.group(1), ff
