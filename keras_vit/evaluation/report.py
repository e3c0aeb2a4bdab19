"""The `keras-vit evaluate` job: few-shot, probe, k-NN and held-out metrics of one model, as a table and files."""

import inspect
import os

import numpy as np

from keras_vit.evaluation import extraction, fewshot_lsr, heldout, knn, probe
from keras_vit.inspection import plots
from keras_vit.training import data
from keras_vit.utils import files

METRICS_FILE, SHOTS_PLOT, CONFUSION_PLOT = "metrics.json", "fewshot.png", "confusion_matrix.png"


def evaluate_features(
    train,
    test,
    *,
    shots=fewshot_lsr.DEFAULT_SHOTS,
    seeds=fewshot_lsr.DEFAULT_SEEDS,
    l2=fewshot_lsr.DEFAULT_L2,
    l2_grid=None,
    k=knn.DEFAULT_K,
    temperature=knn.DEFAULT_TEMPERATURE,
    weight_decays=probe.WEIGHT_DECAYS,
    seed=0,
):
    """Few-shot, probe, k-NN and (with the model's outputs) held-out metrics of two `Features`, as `evaluate`."""
    if train.num_classes != test.num_classes:
        raise ValueError(f"The splits have {train.num_classes} and {test.num_classes} classes: they must agree.")
    splits = (train.features, train.labels, test.features, test.labels)
    classes = dict(num_classes=train.num_classes)
    few = fewshot_lsr.fewshot(
        *splits, shots=shots, seeds=seeds, l2=l2, l2_grid=l2_grid, class_names=train.class_names, seed=seed, **classes
    )
    probed = probe.linear_probe(*splits, weight_decays=weight_decays, seed=seed, **classes)
    knn_accuracy = knn.knn_accuracy(*splits, k=k, temperature=temperature, **classes)
    report = None
    if test.outputs is not None:
        report = heldout.heldout_report(test.outputs, test.labels, test.class_names)
    return {
        "representation": train.kind,
        "feature_dim": int(train.features.shape[1]),
        "train_examples": int(len(train.labels)),
        "test_examples": int(len(test.labels)),
        "num_classes": int(train.num_classes),
        "class_names": list(train.class_names) if train.class_names else None,
        "fewshot": {str(count): result.to_dict() for count, result in few.items()},
        "fewshot_settings": {"seeds": seeds, "l2": l2, "l2_grid": list(l2_grid) if l2_grid else None},
        "linear_probe": probed.to_dict(),
        "knn": {"accuracy": knn_accuracy, "k": k, "temperature": temperature},
        "heldout": report,
    }


def evaluate(model, train, test, *, out=None, image_size=None, batch_size=64, cache_dir=None, verbose=1, **settings):
    """Evaluates a keras_vit model's representation (and head) on a dataset.

    Args:
        model: a keras_vit model, or a user's model with one nested in it.
        train, test: `(dataset, SourceInfo)` pairs (`keras_vit.training.data.load`, `from_arrays`).
        out: optional folder for the files of `write_results`.
        image_size, batch_size: of `extract_features`.
        cache_dir: optional folder for the features (`train.npz`, `test.npz`), reused by the next evaluation.
        verbose: 0 or 1 (progress bars).
        **settings: `shots`, `seeds`, `l2`, `l2_grid`, `k`, `temperature`, `weight_decays`, `seed`.

    Returns:
        The metrics dict: `fewshot` (`{shots: {mean, std, accuracies, l2}}`), `linear_probe`, `knn`, `heldout`
        (`None` without a head for these classes), the representation and the split sizes.
    """
    # An unknown setting, or a split where no image decodes, fails before any extraction.
    inspect.signature(evaluate_features).bind(train, test, **settings)
    for source in (train, test):
        data.check_readable(*extraction.check_source(source))
    common = dict(image_size=image_size, batch_size=batch_size, verbose=verbose)
    train_features = extraction.extract_features(model, train, cache=_cache(cache_dir, "train"), **common)
    # Too few images for the shots asked fails before the test split is read.
    most = max(fewshot_lsr.shot_counts(settings.get("shots", fewshot_lsr.DEFAULT_SHOTS)))
    rng = np.random.default_rng(0)
    fewshot_lsr.draw_shots(train_features.labels, most, rng, train_features.num_classes, train_features.class_names)
    test_features = extraction.extract_features(
        model, test, with_outputs=True, cache=_cache(cache_dir, "test"), **common
    )
    metrics = evaluate_features(train_features, test_features, **settings)
    if out is not None:
        write_results(metrics, out)
    return metrics


def _cache(cache_dir, split):
    return None if cache_dir is None else os.path.join(cache_dir, f"{split}.npz")


def plot_shots(metrics, path, dpi=100):
    """Draws few-shot accuracy against shots (mean and spread of the draws), the other methods as lines."""
    counts = sorted(int(count) for count in metrics["fewshot"])
    means = [metrics["fewshot"][str(count)]["mean"] for count in counts]
    spreads = [metrics["fewshot"][str(count)]["std"] for count in counts]
    figure = plots.new_figure(6, 4, "the few-shot figure")
    axis = figure.subplots()
    axis.errorbar(counts, means, yerr=spreads, marker="o", capsize=3, label="linear few-shot")
    lines = [("linear probe (all images)", metrics["linear_probe"]["accuracy"], "--")]
    lines.append((f"k-NN, k={metrics['knn']['k']} (all images)", metrics["knn"]["accuracy"], ":"))
    if metrics.get("heldout"):
        lines.append(("head top-1", metrics["heldout"]["top1"], "-."))
    for label, value, style in lines:
        axis.axhline(value, linestyle=style, color="gray", label=f"{label}: {value:.3f}")
    axis.set(xscale="log", xlabel="training images per class (shots)", ylabel="test accuracy", ylim=(0, 1.02))
    axis.set_xticks(counts, [str(count) for count in counts])
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, loc="lower right")
    plots.save_png(figure, path, dpi)


def write_results(metrics, out):
    """Writes `metrics.json`, `fewshot.png` and (with a head) `confusion_matrix.png` into `out`; returns the paths."""
    names = [METRICS_FILE, SHOTS_PLOT] + ([CONFUSION_PLOT] if metrics.get("heldout") else [])
    with files.atomic_files(out, names) as staged:
        files.write_json(staged[METRICS_FILE], metrics)
        plot_shots(metrics, staged[SHOTS_PLOT])
        if metrics.get("heldout"):
            heldout.plot_confusion(metrics["heldout"], staged[CONFUSION_PLOT])
    stale = os.path.join(out, CONFUSION_PLOT)
    if CONFUSION_PLOT not in names and os.path.isfile(stale):
        os.remove(stale)  # an earlier evaluation's, which would pass for this one's
    return {name: os.path.join(out, name) for name in names}


def format_table(metrics):
    """The metrics as a plain-text table, one method per row."""
    rows = []
    for count, result in sorted(metrics["fewshot"].items(), key=lambda item: int(item[0])):
        l2s = ", ".join(f"{value:g}" for value in sorted(set(result["l2"])))
        rows.append((f"{count}-shot linear", f"{result['mean']:.4f} ± {result['std']:.4f}", f"l2 {l2s}"))
    probed = metrics["linear_probe"]
    rows.append(("linear probe", f"{probed['accuracy']:.4f}", f"weight decay {probed['weight_decay']:g}"))
    neighbours = metrics["knn"]
    rows.append((f"k-NN (k={neighbours['k']})", f"{neighbours['accuracy']:.4f}", f"T {neighbours['temperature']:g}"))
    report = metrics.get("heldout")
    if report:
        rows.append(("head top-1", f"{report['top1']:.4f}", ""))
        rows.append(("head top-5", f"{report['top5']:.4f}", ""))
        rows.append(("head ECE", f"{report['ece']:.4f}", "15 bins"))
    width = max(len(row[0]) for row in rows)
    lines = [f"{'method':<{width}}  {'accuracy':<17}  notes"]
    lines += [f"{name:<{width}}  {value:<17}  {note}".rstrip() for name, value, note in rows]
    return "\n".join(lines)
