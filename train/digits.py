"""The task: scikit-learn's digits (8x8 images, shipped with the package: no download) and a
small MLP. Train/test split and the per-site shards are fixed by the seed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

FEATURES, CLASSES = 64, 10  # 8x8 pixels in, ten digits out
HIDDEN = 32  # the default width: 2410 parameters, 9640 B per synchronisation
TEST_FRACTION = 0.2


@dataclass(frozen=True)
class Digits:
    x_train: np.ndarray  # float32 (n, 64), pixels / 16
    y_train: np.ndarray  # int64 (n,)
    x_test: np.ndarray
    y_test: np.ndarray

    def shard(self, site: int, n_sites: int) -> tuple[np.ndarray, np.ndarray]:
        """Site ``site``'s equal share of the (already shuffled) training set."""
        idx = np.array_split(np.arange(len(self.y_train)), n_sites)[site]
        return self.x_train[idx], self.y_train[idx]


def load_digits_split(seed: int) -> Digits:
    """The digits data set, shuffled by ``seed``, 80 % train / 20 % test."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(y))
    x, y = (x[order] / 16.0).astype(np.float32), y[order].astype(np.int64)
    n_test = int(len(y) * TEST_FRACTION)
    return Digits(x[n_test:], y[n_test:], x[:n_test], y[:n_test])


def mlp_bytes(hidden: int = HIDDEN) -> int:
    """Bytes of the float32 parameters of the 64 -> hidden -> 10 MLP: what a site contributes
    per average (``--hidden``: e.g. 3333 makes one synchronisation move 1.0 MB)."""
    return 4 * ((FEATURES + 1) * hidden + (hidden + 1) * CLASSES)


def make_mlp(seed: int, hidden: int = HIDDEN) -> Any:
    """64 -> hidden -> 10 MLP, the same initial weights at every site for one seed."""
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, CLASSES))


def evaluate(model: Any, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(mean cross-entropy loss, accuracy) of ``model`` on (x, y)."""
    import torch

    with torch.no_grad():
        logits = model(torch.from_numpy(x))
        loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(y)).item()
        acc = (logits.argmax(1).numpy() == y).mean()
    return float(loss), float(acc)
