"""Core parameters — ports P, width W, slots S, elements E, groups G, jobs J — their defaults and
allowed ranges, checked here and nowhere else (the core, the reducer and the control block all
call :func:`check_core_params`). Each error is one line naming the field and its range.
Pure Python (no Amaranth), so the planner can read the limits without the HDL stack."""

from __future__ import annotations

from wanreduce import wire

__all__ = ["DEFAULTS", "MAX_SLOTS", "CoreParams", "check_core_params", "check_data_width"]

DEFAULTS = {"ports": 2, "width": 64, "slots": 16, "elements": wire.DEFAULT_ELEMENTS, "groups": 4, "jobs": 2}

MAX_SLOTS = 4096  # the reducer's in-order release search grows with S; see docs/reducer.md


def check_data_width(width: int) -> int:
    """Core datapath widths: a multiple of 32 (whole int32 lanes), 64..512 bits."""
    if not isinstance(width, int) or width % 32 or not 64 <= width <= 512 or width & (width - 1):
        raise ValueError(f"data width must be a power of two from 64 to 512 bits, got {width!r}")
    return width


def _range(name: str, lo: int, hi: int, note: str = ""):
    def check(v: int) -> None:
        if not lo <= v <= hi:
            raise ValueError(f"{name} must be {lo}..{hi}{note}, got {v}")
    return check


def _slots(v: int) -> None:
    if not 2 <= v <= MAX_SLOTS or v & (v - 1):
        raise ValueError(f"slots must be a power of two from 2 to {MAX_SLOTS}, got {v}")


_CHECKS = {
    "ports": _range("ports", 1, 8),
    "width": check_data_width,
    "slots": _slots,
    "elements": _range("elements", 1, wire.MAX_ELEMENTS_JUMBO, " (jumbo-frame limit)"),
    "groups": _range("groups", 1, 32),
    "jobs": _range("jobs", 1, 16),
}


def check_core_params(**params: int) -> dict[str, int]:
    """Check the given core parameters (any subset of :data:`DEFAULTS`); returns them."""
    for name, v in params.items():
        if name not in _CHECKS:
            raise ValueError(f"unknown core parameter: {name} (one of {', '.join(DEFAULTS)})")
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"{name} must be an integer, got {v!r}")
        _CHECKS[name](v)
    return params


class CoreParams(dict):
    """All core parameters, defaults filled in, checked."""

    def __init__(self, **kw: int) -> None:
        unknown = set(kw) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown core parameter(s): {', '.join(sorted(unknown))}")
        super().__init__(check_core_params(**{**DEFAULTS, **kw}))
