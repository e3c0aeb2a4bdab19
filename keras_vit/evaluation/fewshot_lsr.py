"""Linear few-shot evaluation (paper section 4), as big_vision's `evaluators/fewshot_lsr.py` runs it.

For each draw, `shots` training images per class are picked at random; their
features are standardised with that set's own mean and standard deviation
(+1e-5), a constant feature of 100.0 is appended (a bias that the L2 penalty
barely touches), and the targets are the classes as {-1, 1} vectors
(`2 * one_hot - 1`). The regularised least-squares weights
`W = (XᵀX + l2 I)⁻¹ XᵀY` come from one eigendecomposition, of `XᵀX` (D x D)
when there are at least as many images N as features D, else of `XXᵀ`
(N x N) with `W = Xᵀ (XXᵀ + l2 I)⁻¹ Y`: any further L2 strength costs one
rescaling of the eigenvalues and a matrix product. The prediction is the
argmax of `X_test W`.

Everything is float64 NumPy: the results are the same on every backend.

Example:

>>> rng = np.random.default_rng(0)
>>> labels = np.repeat(np.arange(3), 10)
>>> features = rng.normal(size=(30, 4)) + 3 * np.eye(3, 4)[labels]
>>> results = fewshot(features, labels, features, labels, shots=(5,), seeds=2)
>>> results[5].accuracies.shape
(2,)
"""

import dataclasses

import numpy as np

from keras_vit.evaluation.blas import single_threaded
from keras_vit.evaluation.extraction import check_splits
from keras_vit.utils import validation

BIAS_FEATURE = 100.0
STD_EPSILON = 1e-5
DEFAULT_L2 = 2.0**10  # big_vision's few-shot configs
DEFAULT_SHOTS = (1, 5, 10, 25)
DEFAULT_SEEDS = 3
# The grid `l2_grid=True` searches: big_vision's configs use one value, 2**10, from this range.
L2_GRID = tuple(2.0**power for power in range(-4, 18, 2))
HOLDOUT_PER_CLASS = 50


def _with_bias(x):
    return np.concatenate([x, np.full((len(x), 1), BIAS_FEATURE)], axis=1)


def _normal_equations(x, labels, num_classes):
    """`XᵀX` and `XᵀY` of the standardised features `x` with the bias column, without copying `x`.

    With `X = [x, b]` (b = 100 in every row): `XᵀX = [[xᵀx, b xᵀ1], [b 1ᵀx, b² N]]`; with
    `Y = 2 onehot - 1`: `XᵀY = 2 Xᵀonehot - Xᵀ1`, where `Xᵀonehot` holds the per-class sums
    (a sparse product, O(N D) instead of O(N D C)).
    """
    from scipy import sparse

    num_points, dim = x.shape
    column_sums = x.sum(axis=0)
    gram = np.empty((dim + 1, dim + 1))
    gram[:dim, :dim] = x.T @ x
    gram[:dim, dim] = gram[dim, :dim] = BIAS_FEATURE * column_sums
    gram[dim, dim] = BIAS_FEATURE**2 * num_points
    members = sparse.csr_matrix((np.ones(num_points), (labels, np.arange(num_points))), shape=(num_classes, num_points))
    class_sums = np.empty((num_classes, dim + 1))
    class_sums[:, :dim] = members @ x
    class_sums[:, dim] = BIAS_FEATURE * np.bincount(labels, minlength=num_classes)
    totals = np.append(column_sums, BIAS_FEATURE * num_points)
    return gram, 2.0 * class_sums.T - totals[:, None]


class RidgeSolver:
    """Closed-form ridge regression onto {-1, 1} targets for any L2 strength.

    Args:
        features: array `(N, D)`, the few-shot set.
        labels: int array `(N,)` in `[0, num_classes)`.
        num_classes: int.

    Example:

    >>> solver = RidgeSolver(np.eye(4, 3) * 10, np.array([0, 1, 2, 0]), 3)
    >>> solver.predict(np.eye(4, 3) * 10, l2=1.0).argmax(axis=1).tolist()
    [0, 1, 2, 0]
    """

    def __init__(self, features, labels, num_classes):
        x = np.array(features, dtype="float64")  # a copy, standardised in place
        labels = np.asarray(labels)
        self.mean = x.mean(axis=0, keepdims=True)
        self.std = x.std(axis=0, keepdims=True) + STD_EPSILON
        x -= self.mean
        x /= self.std
        if len(x) >= x.shape[1] + 1:
            gram, xty = _normal_equations(x, labels, num_classes)
            with single_threaded():
                self.eigenvalues, q = np.linalg.eigh(gram)
            self.lhs, self.rhs = q, q.T @ xty
        else:
            x = _with_bias(x)
            targets = 2.0 * np.eye(num_classes)[labels] - 1.0
            gram = x @ x.T
            with single_threaded():
                self.eigenvalues, q = np.linalg.eigh(gram)
            self.lhs, self.rhs = x.T @ q, q.T @ targets

    def transform(self, features):
        """Standardised with the few-shot set's statistics, the bias feature appended: `(M, D + 1)`."""
        return _with_bias((np.asarray(features, dtype="float64") - self.mean) / self.std)

    def weights(self, l2):
        """The ridge weights `(D + 1, num_classes)` for L2 strength `l2`."""
        return (self.lhs * (1.0 / (self.eigenvalues + l2))) @ self.rhs

    def predict(self, features, l2):
        """The regression outputs `(M, num_classes)` for `features` `(M, D)`."""
        return self.transform(features) @ self.weights(l2)


@dataclasses.dataclass(frozen=True)
class FewShotResult:
    """The accuracies of the draws at one shot count.

    Attributes:
        shots: int, images per class.
        accuracies: array `(draws,)`, test accuracy of each draw.
        l2: array `(draws,)`, the L2 strength each draw used.
    """

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
        return {
            "mean": self.mean,
            "std": self.std,
            "accuracies": [float(a) for a in self.accuracies],
            "l2": [float(v) for v in self.l2],
        }


def draw_shots(labels, shots, rng, num_classes, class_names=None):
    """Indices of `shots` random images of each class (without replacement), class by class.

    Raises:
        ValueError: a class has fewer than `shots` images.
    """
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


def _holdout(labels, chosen, rng, num_classes):
    """Up to `HOLDOUT_PER_CLASS` training images per class outside the draw, for choosing the L2 strength."""
    rest = np.setdiff1d(np.arange(len(labels)), chosen)
    picked = []
    for label in range(num_classes):
        members = rest[labels[rest] == label]
        picked.append(rng.permutation(members)[:HOLDOUT_PER_CLASS])
    picked = np.concatenate(picked)
    if not len(picked):
        raise ValueError(
            "Choosing the L2 strength needs training images outside the few-shot draw, and there are none: "
            "use a fixed L2 strength or more training images."
        )
    return picked


def _accuracy(scores, labels):
    return float(np.mean(np.argmax(scores, axis=1) == labels))


def _one_draw(train, test, shots, rng, num_classes, l2, l2_grid, class_names):
    """`(test accuracy, L2 used)` of one random draw of `shots` images per class."""
    (train_x, train_y), (test_x, test_y) = train, test
    chosen = draw_shots(train_y, shots, rng, num_classes, class_names)
    solver = RidgeSolver(train_x[chosen], train_y[chosen], num_classes)
    if l2_grid:
        held = _holdout(train_y, chosen, rng, num_classes)
        scores = [_accuracy(solver.predict(train_x[held], value), train_y[held]) for value in l2_grid]
        l2 = l2_grid[int(np.argmax(scores))]  # the first (smallest) of equally good strengths
    return _accuracy(solver.predict(test_x, l2), test_y), l2


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
        train_features, train_labels: the training split (features `(N, D)`,
            int labels `(N,)`) the shots are drawn from.
        test_features, test_labels: the split the accuracy is measured on.
        shots: ints, images per class. Defaults to `(1, 5, 10, 25)`.
        seeds: int, random draws per shot count. Defaults to `3`.
        l2: float > 0, the L2 strength. Defaults to `2**10` (big_vision).
        l2_grid: optional sequence of strengths (or `True` for `L2_GRID`):
            each draw picks the best on up to 50 other training images per
            class, instead of using `l2`.
        num_classes: int; defaults to `max(label) + 1` of both splits.
        class_names: optional names, for error messages.
        seed: int, the seed of the first draw.

    Returns:
        A dict `{shots: FewShotResult}`.

    Raises:
        ValueError: a class with fewer training images than the shots, an
            empty split, or features that hold NaN or infinity.
    """
    train, test, num_classes = check_splits(train_features, train_labels, test_features, test_labels, num_classes)
    shots = shot_counts(shots)
    validation.positive_int("seeds", seeds)
    validation.finite_float("l2", l2, minimum=0, include_minimum=False)
    if l2_grid is True:
        l2_grid = L2_GRID
    if l2_grid is not None:
        l2_grid = tuple(validation.finite_float("l2_grid", v, minimum=0, include_minimum=False) for v in l2_grid)
    results = {}
    for count in shots:
        runs = [
            _one_draw(
                train, test, count, np.random.default_rng([seed, draw, count]), num_classes, l2, l2_grid, class_names
            )
            for draw in range(seeds)
        ]
        accuracies, strengths = zip(*runs)
        results[count] = FewShotResult(count, np.asarray(accuracies), np.asarray(strengths))
    return results
