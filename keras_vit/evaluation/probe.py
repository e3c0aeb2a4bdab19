"""Linear probe: scikit-learn's logistic regression on standardised frozen features (docs/evaluation.md); its loss
is the mean cross-entropy plus `weight_decay / 2 * ||W||²`, i.e. `LogisticRegression(C=1 / (weight_decay * N))`."""

import dataclasses

import numpy as np

from keras_vit.evaluation.extraction import check_splits
from keras_vit.evaluation.fewshot_lsr import single_threaded
from keras_vit.utils import validation

WEIGHT_DECAYS = tuple(10.0**power for power in range(-6, 1))
HOLDOUT_FRACTION = 0.2
MAX_ITERATIONS = 1000


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    """A probe's test `accuracy`, its `weight_decay`, and the `holdout_accuracies` `{weight_decay: accuracy}`."""

    accuracy: float
    weight_decay: float
    holdout_accuracies: dict

    def to_dict(self):
        return {
            **dataclasses.asdict(self),
            "holdout_accuracies": {str(k): v for k, v in self.holdout_accuracies.items()},
        }


def _fit(probe, features, labels, weight_decay):
    probe.set_params(C=1.0 / (weight_decay * len(features)) if weight_decay else np.inf)
    with single_threaded():
        return probe.fit(features, labels)


def linear_probe(
    train_features,
    train_labels,
    test_features,
    test_labels,
    *,
    weight_decays=WEIGHT_DECAYS,
    holdout_fraction=HOLDOUT_FRACTION,
    num_classes=None,
    seed=0,
    max_iterations=MAX_ITERATIONS,
):
    """Test accuracy of a logistic-regression probe on frozen features.

    Args:
        train_features, train_labels: the training split, `(N, D)` and `(N,)`.
        test_features, test_labels: the test split.
        weight_decays: a float, or the strengths to choose from on the held-out part. Defaults to `1e-6 ... 1`.
        holdout_fraction: float in (0, 1), the part of each class held out for the choice. Defaults to `0.2`.
        num_classes: int. Defaults to `max(label) + 1` of both splits.
        seed: int, the seed of the held-out split.
        max_iterations: int, L-BFGS iterations per fit.

    Returns:
        A `ProbeResult`.
    """
    from sklearn.linear_model import LogisticRegression

    (train_x, train_y), (test_x, test_y), _ = check_splits(
        train_features, train_labels, test_features, test_labels, num_classes
    )
    grid = (weight_decays,) if np.isscalar(weight_decays) else tuple(weight_decays)
    if not grid:
        raise ValueError("`weight_decays` must hold at least one value. Received: an empty sequence")
    grid = tuple(validation.finite_float("weight_decays", value, minimum=0) for value in grid)
    validation.finite_float("holdout_fraction", holdout_fraction, minimum=0, maximum=1, include_minimum=False)
    mean, std = train_x.mean(axis=0), train_x.std(axis=0) + 1e-5
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std
    scores = {}
    if len(grid) > 1:
        # A stratified held-out part; every class keeps one image to fit.
        rng, fit, held = np.random.default_rng(seed), [], []
        for label in np.unique(train_y):
            members = rng.permutation(np.flatnonzero(train_y == label))
            count = min(int(round(holdout_fraction * len(members))), len(members) - 1)
            held.append(members[:count])
            fit.append(members[count:])
        fit, held = np.concatenate(fit), np.concatenate(held)
        if not len(held):
            raise ValueError(
                "Choosing the probe's weight decay needs a held-out part of the training split, and it is empty: "
                "give more training images or a single weight decay."
            )
        # From the strongest decay down, each fit starting from the last.
        probe = LogisticRegression(max_iter=max_iterations, tol=1e-6, warm_start=True)
        for decay in sorted(grid, reverse=True):
            scores[decay] = _fit(probe, train_x[fit], train_y[fit], decay).score(train_x[held], train_y[held])
    # Ties go to the stronger decay (the simpler model).
    best = max(grid, key=lambda decay: (scores.get(decay, 0.0), decay))
    probe = _fit(LogisticRegression(max_iter=max_iterations, tol=1e-6), train_x, train_y, best)
    return ProbeResult(float(probe.score(test_x, test_y)), best, scores)
