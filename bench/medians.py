"""``median (min–max)`` of repeated measurements, as the benchmark tables print them."""

from __future__ import annotations

import math
import statistics


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    """``median (min–max)`` of ``values`` formatted by ``fmt`` (one value: just it); infinite
    values (never reached) are said as such instead of entering the median."""
    reached = [v for v in values if math.isfinite(v)]
    if not reached:
        return "not reached"
    if len(reached) < len(values):
        return f"reached in {len(reached)}/{len(values)} runs"
    med = fmt.format(statistics.median(values))
    return med if len(values) == 1 else f"{med} ({fmt.format(min(values))}–{fmt.format(max(values))})"
