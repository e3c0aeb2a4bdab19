"""DINO's weighted k-NN on frozen features: a test image's `k` most cosine-similar training images vote for their
class with weight `exp(similarity / T)` (docs/evaluation.md)."""

import numpy as np

from keras_vit.evaluation.extraction import check_splits
from keras_vit.utils import validation

DEFAULT_K = 20
DEFAULT_TEMPERATURE = 0.07


def _normalize(features):
    features = np.asarray(features, dtype="float64")
    return features / np.maximum(np.linalg.norm(features, axis=1, keepdims=True), 1e-12)


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
        k: int, neighbours per test image (at most N).
        temperature: float > 0, of the votes `exp(similarity / temperature)`.
        num_classes: int. Defaults to `max(train_labels) + 1`.
        chunk_size: int, test images per similarity block.

    Returns:
        int array `(M,)`.
    """
    (train_x, train_y), (test_x, _), num_classes = check_splits(
        train_features, train_labels, test_features, np.zeros(len(test_features), dtype="int64"), num_classes
    )
    validation.positive_int("k", k)
    validation.finite_float("temperature", temperature, minimum=0, include_minimum=False)
    validation.positive_int("chunk_size", chunk_size)
    k = min(k, len(train_x))
    train_x, test_x = _normalize(train_x), _normalize(test_x)
    predictions = []
    for start in range(0, len(test_x), chunk_size):
        similarity = test_x[start : start + chunk_size] @ train_x.T
        rows = np.arange(len(similarity))[:, None]
        candidates = np.argpartition(-similarity, k - 1, axis=1)[:, :k]
        # The neighbours by decreasing similarity: their votes are summed in that order.
        neighbours = candidates[rows, np.argsort(-similarity[rows, candidates], axis=1, kind="stable")]
        votes = np.zeros((len(similarity), num_classes))
        np.add.at(votes, (rows, train_y[neighbours]), np.exp(similarity[rows, neighbours] / temperature))
        predictions.append(votes.argmax(axis=1))
    return np.concatenate(predictions)


def knn_accuracy(train_features, train_labels, test_features, test_labels, **kwargs):
    """The accuracy of `knn_predict` on the test split (same keyword arguments)."""
    check_splits(train_features, train_labels, test_features, test_labels, kwargs.get("num_classes"))
    predictions = knn_predict(train_features, train_labels, test_features, **kwargs)
    return float(np.mean(predictions == np.asarray(test_labels)))
