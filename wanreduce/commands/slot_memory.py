"""``--slot-memory`` (build and plan): where the core's slots live, checked against
``hdl.params.SLOT_MEMORIES`` without importing the HDL stack (``plan --help`` stays light)."""

from __future__ import annotations

import click

from wanreduce.errors import WanreduceError


def slot_memory_option(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """One of ``hdl.params.SLOT_MEMORIES``; anything else a one-line error."""
    from wanreduce.hdl.params import SLOT_MEMORIES  # pure Python

    if value is not None and value not in SLOT_MEMORIES:
        raise WanreduceError(f"{param.opts[0]}: must be one of {', '.join(SLOT_MEMORIES)}, "
                             f"got {value!r}")
    return value
