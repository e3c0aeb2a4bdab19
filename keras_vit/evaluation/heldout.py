"""A classifier's head on a held-out split: top-1/top-5, per class, confusion, calibration (Guo et al. 2017)."""

import numpy as np

from keras_vit.evaluation.extraction import check_split
from keras_vit.inspection import plots
from keras_vit.utils import validation

ECE_BINS = 15


def top_k_accuracy(outputs, labels, k):
    """The share of rows whose label is among the `k` highest outputs (ties: the lower index first)."""
    outputs, labels = np.asarray(outputs), np.asarray(labels)
    top = np.argsort(-outputs, axis=1, kind="stable")[:, : validation.positive_int("k", k)]
    return float(np.mean((top == labels[:, None]).any(axis=1)))


def confusion_matrix(predictions, labels, num_classes):
    """Counts `(num_classes, num_classes)`: row = true class, column = predicted class."""
    matrix = np.zeros((num_classes, num_classes), dtype="int64")
    np.add.at(matrix, (np.asarray(labels), np.asarray(predictions)), 1)
    return matrix


def expected_calibration_error(outputs, labels, num_bins=ECE_BINS):
    """The expected calibration error of the top-1 predictions (0 = perfectly calibrated)."""
    probs = np.asarray(outputs, dtype="float64")
    if not (np.all(probs >= 0) and np.allclose(probs.sum(axis=-1), 1.0, atol=1e-3)):
        probs = np.exp(probs - probs.max(axis=-1, keepdims=True))  # logits: a softmax
        probs = probs / probs.sum(axis=-1, keepdims=True)
    confidence, correct = probs.max(axis=1), probs.argmax(axis=1) == np.asarray(labels)
    # Bins (i/n, (i+1)/n]; each bin's share times |accuracy - confidence| is |sum correct - sum confidence| / N.
    bins = np.clip(np.ceil(confidence * validation.positive_int("num_bins", num_bins)).astype(int) - 1, 0, num_bins - 1)
    gaps = np.bincount(bins, weights=correct, minlength=num_bins) - np.bincount(bins, confidence, minlength=num_bins)
    return float(np.abs(gaps).sum() / len(bins))


def heldout_report(outputs, labels, class_names=None, num_bins=ECE_BINS):
    """Top-1, top-5, per-class accuracy, confusion matrix and calibration of a classifier.

    Args:
        outputs: array `(N, num_classes)` of logits or probabilities.
        labels: int array `(N,)`.
        class_names: optional names, one per class. Defaults to `"class <i>"`.
        num_bins: int, the confidence bins of the calibration error.

    Returns:
        A JSON-ready dict: `top1`, `top5` (k at most the classes), `per_class` (name -> accuracy, `None` for a class
        with no image), `ece`, `confusion` (nested lists), `class_names`, `examples`.
    """
    outputs, labels = check_split(outputs, labels, "model output")
    num_classes = outputs.shape[1]
    outside = labels[labels >= num_classes]  # negative ones were refused by check_split
    if len(outside):
        raise ValueError(
            f"Labels must lie in [0, {num_classes}), the model's classes. Received: {len(outside)} outside, "
            f"e.g. {outside[:5].tolist()}"
        )
    names = list(class_names) if class_names is not None else [f"class {index}" for index in range(num_classes)]
    if len(names) != num_classes:
        raise ValueError(f"`class_names` must name the {num_classes} classes. Received: {len(names)} names")
    matrix = confusion_matrix(outputs.argmax(axis=1), labels, num_classes)
    totals = matrix.sum(axis=1)
    per_class = {
        name: (float(matrix[index, index] / totals[index]) if totals[index] else None)
        for index, name in enumerate(names)
    }
    return {
        "top1": top_k_accuracy(outputs, labels, 1),
        "top5": top_k_accuracy(outputs, labels, min(5, num_classes)),
        "per_class": per_class,
        "ece": expected_calibration_error(outputs, labels, num_bins),
        "confusion": matrix.tolist(),
        "class_names": names,
        "examples": int(len(labels)),
    }


def dataset_report(model, dataset, class_names=None, num_bins=ECE_BINS):
    """The `heldout_report` of `model` on a batched `(images, labels[, sample_weights])` dataset (images: an array, or
    a NaFlex batch's dict), as `finetune` runs it.

    Rows of weight 0 (padding) are left out; one-hot labels count as their argmax.
    """
    outputs, labels = [], []
    for batch in dataset.as_numpy_iterator():
        batch_labels = np.asarray(batch[1])
        if batch_labels.ndim == 2:
            batch_labels = batch_labels.argmax(axis=1)
        keep = np.asarray(batch[2]) > 0 if len(batch) > 2 else np.ones(len(batch_labels), bool)
        # `predict`, not `predict_on_batch`: Keras 3.16's JAX trainer reads one batch as several under
        # steps_per_execution > 1.
        outputs.append(np.asarray(model.predict(batch[0], batch_size=len(batch_labels), verbose=0))[keep])
        labels.append(batch_labels[keep])
    if not outputs:
        raise ValueError("The held-out dataset holds no images: pass a split with images in it.")
    return heldout_report(np.concatenate(outputs), np.concatenate(labels), class_names, num_bins)


def plot_confusion(report, path, dpi=100):
    """Draws the confusion matrix of a `heldout_report` (rows: true class), with class names, into a PNG."""
    matrix, names = np.asarray(report["confusion"]), report["class_names"]
    side = min(max(4.0, 0.45 * len(names) + 2.0), 40.0)
    figure = plots.new_figure(side, side, "the confusion-matrix figure")
    axis = figure.subplots()
    figure.colorbar(axis.imshow(matrix, cmap="Blues"), ax=axis, fraction=0.046, pad=0.04)
    axis.set_xticks(range(len(names)), names, rotation=90)
    axis.set_yticks(range(len(names)), names)
    axis.set(xlabel="predicted class", ylabel="true class")
    axis.set_title(f"top-1 {report['top1']:.4f} on {report['examples']} images")
    if len(names) <= 30:  # legible counts
        for (row, column), count in np.ndenumerate(matrix):
            if count:
                color = "white" if count > matrix.max() / 2 else "black"
                axis.text(column, row, str(count), ha="center", va="center", color=color, fontsize=8)
    plots.save_png(figure, path, dpi)
