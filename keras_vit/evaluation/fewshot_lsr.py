"""Linear few-shot evaluation (paper section 4) as big_vision's `fewshot_lsr.py`: closed-form ridge regression onto
`2 * one_hot - 1` targets through one `eigh`, in float64 NumPy (docs/evaluation.md)."""

import contextlib
import dataclasses

import numpy as np

from keras_vit.evaluation.extraction import check_splits
from keras_vit.utils import validation

BIAS_FEATURE = 100.0
DEFAULT_L2 = 2.0**10  # big_vision's few-shot configs
DEFAULT_SHOTS = (1, 5, 10, 25)
DEFAULT_SEEDS = 3
L2_GRID = tuple(2.0**power for power in range(-4, 18, 2))
HOLDOUT_PER_CLASS = 50


def single_threaded():
    """NumPy's BLAS on one thread where `threadpoolctl` is installed (faster for these sizes; docs/evaluation.md)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


class RidgeSolver:
    """Closed-form ridge regression of `features` `(N, D)` onto the {-1, 1} targets of `labels`, any L2 strength."""

    def __init__(self, features, labels, num_classes):
        from scipy import sparse

        features = np.asarray(features, dtype="float64")
        labels = np.asarray(labels)
        self.mean = features.mean(axis=0)
        self.std = features.std(axis=0) + 1e-5
        x = self.transform(features)
        with single_threaded():
            if len(x) >= x.shape[1]:
                # XᵀY = 2 Xᵀ onehot - Xᵀ 1, the class sums through a sparse product: O(N D), not O(N D C).
                members = sparse.csr_array((np.ones(len(x)), (labels, np.arange(len(x)))), (num_classes, len(x)))
                xty = 2.0 * (members @ x).T - x.sum(axis=0)[:, None]
                self.eigenvalues, q = np.linalg.eigh(x.T @ x)
                self.lhs, self.rhs = q, q.T @ xty
            else:
                targets = 2.0 * np.eye(num_classes)[labels] - 1.0
                self.eigenvalues, q = np.linalg.eigh(x @ x.T)
                self.lhs, self.rhs = x.T @ q, q.T @ targets

    def transform(self, features):
        """Standardised with the few-shot set's statistics, the bias feature appended."""
        x = (np.asarray(features, dtype="float64") - self.mean) / self.std
        return np.concatenate([x, np.full((len(x), 1), BIAS_FEATURE)], axis=1)

    def weights(self, l2):
        return (self.lhs / (self.eigenvalues + l2)) @ self.rhs

    def predict(self, features, l2):
        return self.transform(features) @ self.weights(l2)


@dataclasses.dataclass(frozen=True)
class FewShotResult:
    """The test `accuracies` `(draws,)` at `shots` images per class, and the `l2` strength of each draw."""

    shots: int
    accuracies: np.ndarray
    l2: np.ndarray

    @property
    def mean(self):
        return float(np.mean(self.accuracies))

    @property
    def std(self):
        return float(np.std(self.accuracies))

    def to_dict(self):
        return {"mean": self.mean, "std": self.std, "accuracies": self.accuracies.tolist(), "l2": self.l2.tolist()}


def draw_shots(labels, shots, rng, num_classes, class_names=None):
    """Indices of `shots` random images of each class; a ValueError names a class with fewer."""
    chosen = []
    for label in range(num_classes):
        members = np.flatnonzero(labels == label)
        if len(members) < shots:
            name = f" ({class_names[label]!r})" if class_names else ""
            raise ValueError(
                f"Class {label}{name} has {len(members)} training images, fewer than the {shots} shots asked: "
                "ask for fewer shots or give every class more training images."
            )
        chosen.append(rng.choice(members, shots, replace=False))
    return np.concatenate(chosen)


def _accuracy(scores, labels):
    return float(np.mean(np.argmax(scores, axis=1) == labels))


def _best_l2(solver, features, labels, chosen, rng, num_classes, l2_grid):
    """The strength of `l2_grid` most accurate on up to 50 training images per class outside the draw (ties: the
    smallest)."""
    rest = np.setdiff1d(np.arange(len(labels)), chosen)
    held = np.concatenate(
        [rng.permutation(rest[labels[rest] == label])[:HOLDOUT_PER_CLASS] for label in range(num_classes)]
    )
    if not len(held):
        raise ValueError(
            "Choosing the L2 strength needs training images outside the few-shot draw, and there are none: "
            "use a fixed L2 strength or more training images."
        )
    scores = [_accuracy(solver.predict(features[held], value), labels[held]) for value in l2_grid]
    return l2_grid[int(np.argmax(scores))]


def shot_counts(shots):
    """`shots` as a tuple of positive ints: one count, or several."""
    return tuple(validation.positive_int("shots", value) for value in ((shots,) if validation.is_int(shots) else shots))


def fewshot(
    train_features,
    train_labels,
    test_features,
    test_labels,
    *,
    shots=DEFAULT_SHOTS,
    seeds=DEFAULT_SEEDS,
    l2=DEFAULT_L2,
    l2_grid=None,
    num_classes=None,
    class_names=None,
    seed=0,
):
    """Linear few-shot accuracy at each shot count, over several random draws.

    Args:
        train_features, train_labels: the split the shots are drawn from, `(N, D)` and int `(N,)`.
        test_features, test_labels: the split the accuracy is measured on.
        shots: int or ints, images per class. Defaults to `(1, 5, 10, 25)`.
        seeds: int, random draws per shot count. Defaults to `3`.
        l2: float > 0, the L2 strength. Defaults to `2**10` (big_vision).
        l2_grid: optional strengths (`True`: `L2_GRID`), each draw's best on 50 other images per class.
        num_classes: int. Defaults to `max(label) + 1` of both splits.
        class_names: optional names, for error messages.
        seed: int; draw `d` at `shots` uses `np.random.default_rng([seed, d, shots])`.

    Returns:
        A dict `{shots: FewShotResult}`.
    """
    (train_x, train_y), (test_x, test_y), num_classes = check_splits(
        train_features, train_labels, test_features, test_labels, num_classes
    )
    shots = shot_counts(shots)
    validation.positive_int("seeds", seeds)
    validation.finite_float("l2", l2, minimum=0, include_minimum=False)
    if l2_grid is True:
        l2_grid = L2_GRID
    if l2_grid is not None:
        l2_grid = tuple(validation.finite_float("l2_grid", v, minimum=0, include_minimum=False) for v in l2_grid)
    results = {}
    for count in shots:
        accuracies, strengths = [], []
        for draw in range(seeds):
            rng = np.random.default_rng([seed, draw, count])
            chosen = draw_shots(train_y, count, rng, num_classes, class_names)
            solver = RidgeSolver(train_x[chosen], train_y[chosen], num_classes)
            if l2_grid is not None:
                l2 = _best_l2(solver, train_x, train_y, chosen, rng, num_classes, l2_grid)
            accuracies.append(_accuracy(solver.predict(test_x, l2), test_y))
            strengths.append(l2)
        results[count] = FewShotResult(count, np.asarray(accuracies), np.asarray(strengths))
    return results
