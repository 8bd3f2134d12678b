"""PyTorch training through wanreduce aggregators (issue 15): DDP hook, schedule-driven averager,
the per-site training processes behind ``wanreduce train``.

torch is an optional extra: nothing here imports it at module level except the files that need
it, and those are imported only when training runs (``require_torch`` says what to install).
"""

from __future__ import annotations

from types import ModuleType

TORCH_HINT = "wanreduce train needs the torch extra: pip install 'wanreduce[torch]'"


def require_torch() -> ModuleType:
    """The torch module, or a one-line WanreduceError naming the extra to install."""
    try:
        import torch
    except ImportError:
        from wanreduce.errors import WanreduceError

        raise WanreduceError(TORCH_HINT) from None
    return torch
