"""Loss (and accuracy) against wall-clock time for several runs (schedules) on one chart
(``--plot``; bench/bench_train_schedules.py adds the accuracy panel with its target)."""

from __future__ import annotations

from typing import Any


def plot_loss_vs_time(runs: list[dict[str, Any]], path: str,
                      accuracy_target: float | None = None) -> None:
    """One line per run: the sites' mean training loss against seconds since the start; with
    ``accuracy_target``, a second panel of their mean test accuracy with the target drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from wanreduce.planner.topology import format_size

    panels = 1 if accuracy_target is None else 2
    fig, axes = plt.subplots(1, panels, figsize=(7 * panels, 4.5), squeeze=False)
    loss_ax = axes[0][0]
    for run in runs:
        t = [r["time_s"] for r in run["rows"]]
        label = f"{run['schedule']} ({run['label']})"
        style = {"marker": ".", "label": label, "linestyle": run.get("linestyle", "-")}
        loss_ax.plot(t, [r["loss"] for r in run["rows"]], **style)
        if accuracy_target is not None:
            axes[0][1].plot(t, [r["accuracy"] for r in run["rows"]], **style)
    first = runs[0]
    loss_ax.set_ylabel("training loss (mean over sites)")
    loss_ax.set_yscale("log")
    if accuracy_target is not None:
        acc_ax = axes[0][1]
        acc_ax.axhline(accuracy_target, color="grey", linestyle="--",
                       label=f"target {accuracy_target:g}")
        acc_ax.set_ylabel("test accuracy (mean over sites)")
        acc_ax.set_ylim(max(0.0, accuracy_target - 0.4), 1.0)
    for ax in axes[0]:
        ax.set_xlabel("wall-clock time (s)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{first['topology']}: {first['sites']} sites, H = {first['local_steps']}, "
                 f"{first.get('model_bytes', 0) / 1e6:.2g} MB a sync, FPGA memory "
                 f"{format_size(first['memory_bytes'])}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
