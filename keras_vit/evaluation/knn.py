"""Weighted k-nearest-neighbour classification on frozen features (the DINO evaluation).

Features are L2-normalised; each test image takes its `k` most cosine-similar
training images and each neighbour votes for its class with weight
`exp(similarity / temperature)` (Wu et al. 2018, "Unsupervised Feature
Learning via Non-Parametric Instance Discrimination", and DINO's
`eval_knn.py`, both with `k = 20` and `temperature = 0.07`). The prediction is
the class with the largest total vote. The test split is processed in chunks,
so memory stays `chunk_size x num_train`.

Example:

>>> train = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
>>> knn_predict(train, np.array([0, 0, 1]), np.array([[1.0, 0.2]]), k=2).tolist()
[0]
"""

import numpy as np

from keras_vit.evaluation.extraction import check_classes, check_split, check_splits
from keras_vit.utils import validation

DEFAULT_K = 20
DEFAULT_TEMPERATURE = 0.07


def normalize(features):
    """Rows scaled to unit L2 norm (a zero row stays zero)."""
    features = np.asarray(features, dtype="float64")
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    return features / np.maximum(norms, 1e-12)


def knn_predict(
    train_features,
    train_labels,
    test_features,
    *,
    k=DEFAULT_K,
    temperature=DEFAULT_TEMPERATURE,
    num_classes=None,
    chunk_size=1024,
):
    """The k-NN class of every test image.

    Args:
        train_features, train_labels: the neighbours, `(N, D)` and `(N,)`.
        test_features: `(M, D)`.
        k: int, neighbours per test image (at most N are used).
        temperature: float > 0, of the votes `exp(similarity / temperature)`.
        num_classes: int; defaults to `max(train_labels) + 1`.
        chunk_size: int, test images per similarity block.

    Returns:
        int array `(M,)`. Neighbours are taken by decreasing similarity and
        their votes summed in that order; among equally similar neighbours
        at the k-th place the choice is arbitrary.
    """
    (train_x, train_y), (test_x, _), num_classes = check_splits(
        train_features, train_labels, test_features, np.zeros(len(test_features), dtype="int64"), num_classes
    )
    validation.positive_int("k", k)
    validation.finite_float("temperature", temperature, minimum=0, include_minimum=False)
    validation.positive_int("chunk_size", chunk_size)
    k = min(k, len(train_x))
    train_x, test_x = normalize(train_x), normalize(test_x)
    predictions = []
    for start in range(0, len(test_x), chunk_size):
        similarity = test_x[start : start + chunk_size] @ train_x.T
        candidates = np.argpartition(-similarity, k - 1, axis=1)[:, :k]
        rows = np.arange(len(similarity))[:, None]
        order = np.argsort(-similarity[rows, candidates], axis=1, kind="stable")
        neighbours = candidates[rows, order]
        weights = np.exp(similarity[rows, neighbours] / temperature)
        votes = np.zeros((len(similarity), num_classes))
        for column in range(k):  # in order of similarity, one neighbour per row at a time
            np.add.at(votes, (rows[:, 0], train_y[neighbours[:, column]]), weights[:, column])
        predictions.append(votes.argmax(axis=1))
    return np.concatenate(predictions)


def knn_accuracy(train_features, train_labels, test_features, test_labels, **kwargs):
    """The accuracy of `knn_predict` on the test split (same keyword arguments)."""
    test_x, test_y = check_split(test_features, test_labels, "test")
    check_classes(kwargs.get("num_classes"), np.asarray(train_labels), test_y)
    return float(np.mean(knn_predict(train_features, train_labels, test_x, **kwargs) == test_y))
