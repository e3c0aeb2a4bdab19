"""Linear probe: multinomial logistic regression on frozen features.

The features are standardised with the training split's mean and standard
deviation; the objective is the mean softmax cross-entropy plus
`weight_decay / 2 * ||W||²` (the bias is not penalised), minimised with
SciPy's L-BFGS. This is scikit-learn's `LogisticRegression` with
`C = 1 / (weight_decay * num_images)`. The weight decay is chosen from a grid
by the accuracy on a stratified held-out part of the training split, then
the probe is refitted on the whole training split.

Example:

>>> rng = np.random.default_rng(0)
>>> labels = np.repeat(np.arange(3), 20)
>>> features = rng.normal(size=(60, 5)) + 3 * np.eye(3, 5)[labels]
>>> result = linear_probe(features, labels, features, labels)
>>> result.accuracy > 0.9
True
"""

import dataclasses

import numpy as np

from keras_vit.evaluation.blas import single_threaded
from keras_vit.evaluation.extraction import check_splits
from keras_vit.utils import validation

WEIGHT_DECAYS = tuple(10.0**power for power in range(-6, 1))
HOLDOUT_FRACTION = 0.2
MAX_ITERATIONS = 1000


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    """A fitted linear probe's test accuracy.

    Attributes:
        accuracy: float, on the test split.
        weight_decay: float, the strength used for the final fit.
        holdout_accuracies: dict `{weight_decay: accuracy}` on the held-out
            part of the training split (empty when one strength was given).
    """

    accuracy: float
    weight_decay: float
    holdout_accuracies: dict

    def to_dict(self):
        return {
            "accuracy": self.accuracy,
            "weight_decay": self.weight_decay,
            "holdout_accuracies": {str(k): v for k, v in self.holdout_accuracies.items()},
        }


def _loss_and_gradient(params, x, onehot, weight_decay):
    dim, classes = x.shape[1], onehot.shape[1]
    weights, bias = params[: dim * classes].reshape(dim, classes), params[dim * classes :]
    logits = x @ weights + bias
    logits -= logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    count = len(x)
    loss = -np.sum(onehot * log_probs) / count + 0.5 * weight_decay * np.sum(weights * weights)
    error = (np.exp(log_probs) - onehot) / count
    gradient = np.concatenate([(x.T @ error + weight_decay * weights).ravel(), error.sum(axis=0)])
    return loss, gradient


def fit_logistic(features, labels, num_classes, weight_decay, initial=None, max_iterations=MAX_ITERATIONS):
    """Minimises the probe's objective; returns the flat parameters (`W` row-major, then the bias).

    Args:
        features: float array `(N, D)`, already standardised.
        labels: int array `(N,)`.
        num_classes: int.
        weight_decay: float >= 0.
        initial: optional flat parameters to start from (a warm start).
        max_iterations: int, L-BFGS iterations at most.
    """
    from scipy import optimize

    features = np.asarray(features, dtype="float64")
    onehot = np.eye(num_classes)[labels]
    start = np.zeros(features.shape[1] * num_classes + num_classes) if initial is None else initial
    with single_threaded():
        result = optimize.minimize(
            _loss_and_gradient,
            start,
            args=(features, onehot, weight_decay),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": max_iterations, "gtol": 1e-6, "ftol": 1e-12},
        )
    return result.x


def predict_logistic(params, features, num_classes):
    """The logits `(N, num_classes)` of flat probe parameters on standardised `features`."""
    dim = features.shape[1]
    return features @ params[: dim * num_classes].reshape(dim, num_classes) + params[dim * num_classes :]


def _holdout_split(labels, fraction, rng):
    """A stratified split of the training indices: `(fit, held_out)`; every class keeps one image to fit."""
    fit, held = [], []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        count = min(int(round(fraction * len(members))), len(members) - 1)
        held.append(members[:count])
        fit.append(members[count:])
    return np.concatenate(fit), np.concatenate(held)


def _select(x, labels, num_classes, weight_decays, fraction, seed, max_iterations):
    """`{weight_decay: held-out accuracy}`, fitted from the strongest decay down with warm starts."""
    fit, held = _holdout_split(labels, fraction, np.random.default_rng(seed))
    if not len(held):
        raise ValueError(
            "Choosing the probe's weight decay needs a held-out part of the training split, and it is empty: "
            "give more training images or a single weight decay."
        )
    scores, params = {}, None
    for decay in sorted(weight_decays, reverse=True):
        params = fit_logistic(x[fit], labels[fit], num_classes, decay, initial=params, max_iterations=max_iterations)
        predictions = predict_logistic(params, x[held], num_classes).argmax(axis=1)
        scores[decay] = float(np.mean(predictions == labels[held]))
    return scores


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
        weight_decays: a float, or the strengths to choose from on the
            held-out part. Defaults to `1e-6 ... 1`.
        holdout_fraction: float in (0, 1), the part of each class held out
            for the choice. Defaults to `0.2`.
        num_classes: int; defaults to `max(label) + 1` of both splits.
        seed: int, the seed of the held-out split.
        max_iterations: int, L-BFGS iterations per fit.

    Returns:
        A `ProbeResult`.
    """
    (train_x, train_y), (test_x, test_y), num_classes = check_splits(
        train_features, train_labels, test_features, test_labels, num_classes
    )
    grid = (weight_decays,) if np.isscalar(weight_decays) else tuple(weight_decays)
    if not grid:
        raise ValueError("`weight_decays` must hold at least one value. Received: an empty sequence")
    grid = tuple(validation.finite_float("weight_decays", value, minimum=0) for value in grid)
    validation.finite_float("holdout_fraction", holdout_fraction, minimum=0, maximum=1, include_minimum=False)
    mean, std = train_x.mean(axis=0), train_x.std(axis=0) + 1e-5
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std
    scores = (
        _select(train_x, train_y, num_classes, grid, holdout_fraction, seed, max_iterations) if len(grid) > 1 else {}
    )
    # Ties go to the stronger decay (the simpler model).
    best = max(grid, key=lambda decay: (scores.get(decay, 0.0), decay))
    params = fit_logistic(train_x, train_y, num_classes, best, max_iterations=max_iterations)
    accuracy = float(np.mean(predict_logistic(params, test_x, num_classes).argmax(axis=1) == test_y))
    return ProbeResult(accuracy, best, scores)
