"""Loss against wall-clock time for several runs (schedules) on one chart (``--plot``)."""

from __future__ import annotations

from typing import Any


def plot_loss_vs_time(runs: list[dict[str, Any]], path: str) -> None:
    """One line per run: the sites' mean training loss against seconds since the start."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from wanreduce.planner.topology import format_size

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for run in runs:
        t = [r["time_s"] for r in run["rows"]]
        loss = [r["loss"] for r in run["rows"]]
        ax.plot(t, loss, marker=".", label=f"{run['schedule']} ({run['label']})")
    first = runs[0]
    ax.set_xlabel("wall-clock time (s)")
    ax.set_ylabel("training loss (mean over sites)")
    ax.set_yscale("log")
    ax.set_title(f"{first['topology']}: {first['sites']} sites, H = {first['local_steps']}, "
                 f"FPGA memory {format_size(first['memory_bytes'])}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
