"""What a run reports, computed in the launcher from the sites' parameter snapshots: per outer
step, the wall-clock time (the slowest site's), the sites' mean training loss and test accuracy,
the accuracy of the sites' average model, and the consensus distance between sites."""

from __future__ import annotations

from typing import Any

import numpy as np

from .digits import HIDDEN, Digits, evaluate, make_mlp


def consensus_distance(vectors: np.ndarray) -> float:
    """RMS over sites of ||x_s - mean x||_2: 0 when every site holds the same parameters."""
    v = vectors.astype(np.float64)  # a float32 mean of equal values is not always that value
    dev = v - v.mean(axis=0)
    return float(np.sqrt((dev**2).sum(axis=1).mean()))


def progress_rows(payloads: list[dict[str, Any]], data: Digits, seed: int,
                  local_steps: int, hidden: int = HIDDEN) -> list[dict[str, float]]:
    """One row per snapshot (all sites snapshot at the same outer steps)."""
    from torch import from_numpy
    from torch.nn.utils import vector_to_parameters

    model = make_mlp(seed, hidden)

    def score(vec: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        vector_to_parameters(from_numpy(vec.copy()), model.parameters())
        return evaluate(model, x, y)

    rows = []
    for j, (k, _, _) in enumerate(payloads[0]["snapshots"]):
        snaps = [p["snapshots"][j] for p in payloads]
        assert all(s[0] == k for s in snaps), "sites snapshot at different outer steps"
        vecs = np.stack([s[2] for s in snaps])
        train = [score(v, data.x_train, data.y_train)[0] for v in vecs]
        test = [score(v, data.x_test, data.y_test)[1] for v in vecs]
        mean_loss, mean_acc = score(vecs.mean(axis=0).astype(np.float32), data.x_test, data.y_test)
        rows.append({"outer_step": k, "local_steps": k * local_steps,
                     "time_s": max(s[1] for s in snaps), "loss": float(np.mean(train)),
                     "accuracy": float(np.mean(test)), "mean_model_accuracy": mean_acc,
                     "consensus": consensus_distance(vecs)})
    return rows
