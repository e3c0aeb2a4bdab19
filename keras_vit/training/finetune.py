"""The `keras-vit finetune` job: train or fine-tune a ViT and write its results.

With no arguments it trains a small ViT from scratch on the 8x8 handwritten
digits bundled with scikit-learn (1,797 images, no download), upscaled to
16x16 and repeated to 3 channels, and evaluates on a fixed, stratified 20 %
held-out split. With arguments it fine-tunes any variant on a TFDS dataset or
an image folder with the official recipe.

Everything goes to `--out`:

* `model.keras`: the trained model; it, `metrics.json`, `training_curves.png`
  and `confusion_matrix.png` are written as one set (`keras_vit.utils.files.atomic_files`);
* `metrics.json`: held-out accuracy and loss, optimizer steps, images/s,
  wall time, and the settings;
* `training_curves.png`: loss and accuracy per epoch;
* `confusion_matrix.png`: the held-out confusion matrix with class names
  (`metrics.json`'s `heldout_report` adds top-5, per-class accuracy and the
  calibration error; `keras_vit.evaluation.heldout`);
* `history.csv`: the per-epoch log the curves are drawn from;
* `checkpoint.keras` (last epoch) and `backup/` (the `BackupAndRestore`
  state, deleted when training finishes): a run killed at any moment resumes
  when restarted with the same command.
"""

import dataclasses
import json
import math
import os
import time

import numpy as np

from keras_vit.training import settings
from keras_vit.training.settings import DIGITS, SMALL_MODEL
from keras_vit.utils import docstrings, extras, files

# The default job's model: 16x16 inputs in 4x4 patches (16 tokens + class
# token), 4 blocks of width 64. Chosen to reach >= 97 % held-out accuracy on
# the digits within the 3-minute budget of a 2-core CPU.
SMALL_CONFIG = dict(patch_size=4, hidden_dim=64, num_layers=4, num_heads=4, mlp_dim=128)
DIGITS_IMAGE_SIZE = 16
DIGITS_HOLDOUT_FRACTION = 0.2
CONFUSION_NAME = "confusion_matrix.png"


def digits_sources(seed=0):
    """The scikit-learn digits as `(train, eval)` sources (see `keras_vit.training.data`).

    Pixels 0-16 are mapped to 0-255; the stratified 80/20 split is fixed by
    `seed`.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from keras_vit.training import data

    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    train_x, eval_x, train_y, eval_y = train_test_split(
        images, digits.target, test_size=DIGITS_HOLDOUT_FRACTION, stratify=digits.target, random_state=seed
    )
    names = tuple(str(digit) for digit in range(10))
    return (
        data.from_arrays(train_x, train_y, num_classes=10, class_names=names),
        data.from_arrays(eval_x, eval_y, num_classes=10, class_names=names),
    )


def training_model(model_name, weights, image_size, num_classes, remat=False, patch_dropout=0.0):
    """The small default model or a named constructor, with logits output (`remat` and `patch_dropout`:
    the constructors' `remat` and `patch_dropout_rate`)."""
    import keras_vit

    shape = (image_size, image_size, 3)
    training_options = dict(remat=remat, patch_dropout_rate=patch_dropout)
    if model_name == SMALL_MODEL:
        if weights is not None:
            raise ValueError(f"--model {SMALL_MODEL} has no pretrained weights. Received: weights={weights!r}")
        return keras_vit.VisionTransformer(
            **SMALL_CONFIG,
            input_shape=shape,
            classes=num_classes,
            classifier_activation=None,
            name="vit_small_digits",
            **training_options,
        )
    try:
        constructor = keras_vit.models.applications.constructor_for(model_name)
    except ValueError as error:
        raise ValueError(f"{error} Or {SMALL_MODEL!r}, the default digits model.") from None
    # The paper fine-tunes without pre_logits and with a zero-initialised head,
    # which is what the constructors build for a new number of classes.
    return constructor(
        weights=weights, input_shape=shape, classes=num_classes, classifier_activation=None, **training_options
    )


def read_history(path):
    """Per-epoch logs from `history.csv`, one row per epoch (a repeated epoch
    after a resume keeps its last row). Keras's `CSVLogger` writes `NA` for a
    metric an epoch did not log: it reads as NaN (a gap in the curves)."""
    import csv

    if not os.path.exists(path):
        return {}
    rows = {}
    with open(path) as file:
        for row in csv.DictReader(file):
            rows[int(row["epoch"])] = row
    history = {}
    for epoch in sorted(rows):
        for key, value in rows[epoch].items():
            history.setdefault(key, []).append(float("nan") if value in ("NA", "") else float(value))
    return history


def plot_curves(history, path):
    """Draws loss and accuracy per epoch (train and held-out) into a PNG."""
    matplotlib = extras.require("matplotlib", "the training curves", extra="inspect")
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    epochs = [e + 1 for e in history.get("epoch", [])]
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for axis, metric in zip(axes, ("loss", "accuracy")):
        for key, label in ((metric, "train"), (f"val_{metric}", "held-out")):
            if key in history:
                axis.plot(epochs, history[key], marker="o", markersize=3, label=label)
        axis.set_xlabel("epoch")
        axis.set_title(metric)
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    with files.atomic_file(path) as staged:
        figure.savefig(staged, dpi=100, format="png")
    plt.close(figure)


class _BatchLayout:
    """What `FinetuneConfig` derives from its settings: the batch layout."""

    @property
    def digits(self):
        return self.data == DIGITS

    @property
    def mixing(self):
        """MixUp or CutMix on: the targets are one-hot (soft) vectors."""
        return bool(self.mixup or self.cutmix)

    @property
    def fit_batch_size(self):
        """The batch `fit` sees: one optimizer update takes `accumulation_steps` of them."""
        return self.batch_size // self.accumulation_steps

    @property
    def updates_per_epoch(self):
        return math.ceil(self.steps / self.epochs)

    @property
    def batches_per_epoch(self):
        return self.updates_per_epoch * self.accumulation_steps

    @property
    def total_batches(self):
        return self.steps * self.accumulation_steps


# One field per setting of `keras_vit.training.settings.SETTINGS`, in its order.
FinetuneConfig = dataclasses.make_dataclass(
    "FinetuneConfig",
    [(setting.name, setting.type) for setting in settings.SETTINGS],
    bases=(_BatchLayout,),
    frozen=True,
    namespace={
        "__module__": __name__,
        "__doc__": """The settings of one run, every default resolved and every value checked.

    Build it with `make_config` (same arguments as `finetune`); the fields
    (one per `keras_vit.training.settings.SETTINGS` entry) are the resolved
    values, the properties derive the batch layout. `epochs` may be fewer
    than asked: the steps are spread over `ceil(steps / epochs)` updates per
    epoch, and only the epochs that hold updates are run (the last one may
    be shorter).
    """,
    },
)


def make_config(**options):
    """Resolves the defaults of `finetune`'s arguments and checks every value.

    Each value given is checked by its setting (`keras_vit.training.settings`);
    `None` means "the default for this data" (see `finetune`); any number
    given is checked, never replaced: 0 and negative sizes are errors. Then
    the settings are checked against each other.

    Returns:
        A `FinetuneConfig`.

    Raises:
        TypeError: for an argument that is not a setting.
        ValueError: naming the argument and the accepted values.
    """
    from keras_vit.training import multihost

    values = settings.parse(options)
    multihost.settings(values["coordinator"], values["num_processes"], values["process_id"])  # resolved later
    return FinetuneConfig(**_resolve(values))


def _resolve(values):
    """The data-dependent defaults (the `shown` texts of `SETTINGS`) and the checks across settings."""
    digits, pretrained = values["data"] == DIGITS, values["weights"] is not None

    def default(name, value):
        if values[name] is None:
            values[name] = value
        return values[name]

    default("image_size", DIGITS_IMAGE_SIZE if digits else 224)
    batch_size = default("batch_size", 64 if digits else 512)
    steps = default("steps", 1500 if digits else 10_000)
    epochs = default("epochs", min(20 if digits else 10, steps))
    if epochs > steps:
        raise ValueError(f"`epochs` must be at most `steps` ({steps}). Received: epochs={epochs}")
    values["epochs"] = math.ceil(steps / math.ceil(steps / epochs))  # only epochs that hold updates
    if batch_size % values["accumulation_steps"]:
        raise ValueError(
            f"`accumulation_steps` must be a positive divisor of `batch_size`. "
            f"Received: batch_size={batch_size}, accumulation_steps={values['accumulation_steps']}"
        )
    if values["optimizer"] == "auto":
        values["optimizer"] = "sgd" if pretrained else "adamw"
    # SGD's 0.03 is the paper's rate at batch 512, scaled linearly.
    default("learning_rate", 0.03 * batch_size / 512 if values["optimizer"] == "sgd" else 2e-3)
    warmup_steps = default("warmup_steps", min(500, steps // 10))
    if warmup_steps >= steps:
        raise ValueError(f"`warmup_steps` must be less than `steps` ({steps}). Received: warmup_steps={warmup_steps}")
    default("label_smoothing", 0.0 if pretrained else 0.1)
    return values


@dataclasses.dataclass(frozen=True)
class Datasets:
    """The pipelines of a run and what their sources hold (`data.SourceInfo`)."""

    train: object
    eval: object
    train_info: object
    eval_info: object

    @property
    def class_names(self):
        return self.train_info.class_names


def load_sources(config, shard=None):
    """The `(dataset, SourceInfo)` pairs of the training and held-out data.

    Image folders in the split layout use `train_split` and `eval_split`;
    in the flat layout `root/<class>/` the files are split with
    `validation_split` and `seed` (as `keras.utils.image_dataset_from_directory`).
    `shard` (`(num_shards, index)`) reads only this host's part of the
    training files or TFDS split (the digits, arrays in memory, are sharded
    by the training pipeline instead).
    """
    from keras_vit.training import data

    if config.digits:
        return digits_sources(config.seed)
    shuffle = dict(shuffle_files=True, seed=config.seed, shard=shard)
    if config.data.startswith("tfds:"):
        train = data.load(config.data, config.train_split, data_dir=config.data_dir, **shuffle)
        eval_split = config.eval_split or data.default_eval_split(config.data, config.data_dir)
        return train, data.load(config.data, eval_split, data_dir=config.data_dir)
    if data.folder_layout(config.data, config.train_split) == "flat":
        split = dict(validation_split=config.validation_split, seed=config.seed)
        train = data.load(config.data, None, subset="training", shuffle_files=True, **split)
        _check_classes(train[1], config.data)
        names = train[1].class_names
        return train, data.load(config.data, None, subset="validation", class_names=names, **split)
    train = data.load(config.data, config.train_split, **shuffle)
    _check_classes(train[1], os.path.join(config.data, config.train_split))
    eval_split = config.eval_split or data.default_eval_split(config.data)
    return train, data.load(config.data, eval_split, class_names=train[1].class_names)


def _check_classes(info, folder):
    """Refuses a training folder with fewer than 2 class folders (Keras would train a 1-logit "classifier")."""
    if info.num_classes < 2:
        names = ", ".join(repr(name) for name in info.class_names)
        raise ValueError(
            f"{folder} has {info.num_classes} class ({names}); a classifier needs at least 2: put each class's "
            f"images in its own folder, {os.path.join(folder, '<class>', '*.jpg')}."
        )


def make_datasets(config):
    """The training pipeline (repeated: `fit` counts the steps) and the held-out one.

    In a multi-process run (`keras_vit.training.multihost`) each process reads its
    own shard of the training data and feeds its part of every global
    batch, with its own augmentation draws; every process builds the whole
    held-out pipeline, padded to global batches (weight 0 on the padding),
    and feeds its slice of each, so the evaluation is that of one process.

    An image folder with fewer than 2 classes, or whose training or held-out
    files all fail to decode, is a `ValueError` here, before any model is
    built (`data.check_readable`: one decoded image per source on a healthy
    folder).

    Returns:
        `Datasets`. With MixUp or CutMix the held-out labels are one-hot too,
        so the compiled loss and accuracy measure both the same way.
    """
    from keras_vit.training import data, multihost

    processes = multihost.process_info()
    shard = multihost.data_shard()
    # Files and TFDS splits are sharded before decoding; the in-memory digits in the pipeline.
    (train_source, train_info), (eval_source, eval_info) = load_sources(config, None if config.digits else shard)
    data.check_readable(train_source, train_info)
    data.check_readable(eval_source, eval_info)
    train = data.train_pipeline(
        train_source,
        image_size=config.image_size,
        batch_size=multihost.per_process_batch_size(config.fit_batch_size),
        shard=shard if config.digits else None,
        num_classes=train_info.num_classes,
        # Digits are centred and small: a mild crop, no flip (a mirrored 2
        # is no 2). Natural images get the paper's 5-100 % crop and flips.
        area_range=(0.85, 1.0) if config.digits else data.DEFAULT_AREA_RANGE,
        flip=not config.digits,
        randaugment=config.randaugment,
        mixup_alpha=config.mixup,
        cutmix_alpha=config.cutmix,
        cache=config.digits,
        repeat=True,
        seed=config.seed + processes.index,
    )
    evaluation = data.eval_pipeline(
        eval_source,
        image_size=config.image_size,
        batch_size=config.fit_batch_size,
        cache=config.digits,
        static_shapes=processes.count > 1,
        num_examples=eval_info.num_examples,  # batches known without reading the files; weight 0 on any unreadable
    )
    if config.mixing:
        import tensorflow as tf

        depth = train_info.num_classes
        evaluation = evaluation.map(lambda images, labels, *weights: (images, tf.one_hot(labels, depth), *weights))
    return Datasets(train, multihost.split_batches(evaluation), train_info, eval_info)


def steps_per_execution(config):
    """Batches per call of the train function.

    Several per call cut the per-batch overhead; a divisor of the epoch and
    of the last (possibly shorter) epoch keeps every epoch end, backup and
    the final stop on a call boundary, so exactly `steps` updates run. The
    PyTorch backend runs one step per call.
    """
    import keras

    max_per_call = 1 if keras.backend.backend() == "torch" else 8
    last_epoch = config.total_batches - (config.epochs - 1) * config.batches_per_epoch
    return max(d for d in range(1, max_per_call + 1) if config.batches_per_epoch % d == 0 and last_epoch % d == 0)


def make_optimizer(config, model):
    """The optimizer of the run: the official fine-tune SGD or the pre-training AdamW."""
    from keras_vit import training

    common = dict(
        learning_rate=config.learning_rate,
        total_steps=config.steps,
        warmup_steps=config.warmup_steps,
        accumulation_steps=config.accumulation_steps,
        layer_decay=config.layer_decay,
        model=model,
    )
    if config.optimizer == "sgd":
        return training.finetune_optimizer(**common)
    return training.pretrain_optimizer(weight_decay=0.05, end_learning_rate=1e-5, **common)


def compile_model(config, setup, num_classes, class_names):
    """Builds the model in `setup`'s scope, names its classes and compiles it."""
    from keras_vit import training
    from keras_vit.models import metadata

    with setup.scope():
        model = training_model(
            config.model, config.weights, config.image_size, num_classes, config.remat, config.patch_dropout
        )
        if class_names:
            model = metadata.with_class_names(model, class_names)
        model.compile(
            optimizer=make_optimizer(config, model),
            loss=training.classification_loss(config.label_smoothing, from_logits=True, one_hot=config.mixing),
            # Weighted: padding in a static-shape evaluation has weight 0,
            # which plain `metrics` would ignore (and count the padding).
            weighted_metrics=["accuracy"],
            jit_compile=setup.jit_compile,
            steps_per_execution=steps_per_execution(config),
        )
    return model


@dataclasses.dataclass(frozen=True)
class Callbacks:
    """The callbacks of `fit`, and the two whose readings the report uses."""

    all: list
    stop: object
    throughput: object
    history_path: str


# Settings that do not change what is trained: a backup resumes whatever they are.
_NOT_THE_RUN = ("out", "verbose", "backup_every", "coordinator", "num_processes", "process_id", "heartbeat_timeout")


def run_settings(config):
    """What defines a run, as stored with its backup: every setting but where and how it reports and syncs."""
    values = {name: value for name, value in dataclasses.asdict(config).items() if name not in _NOT_THE_RUN}
    return json.loads(json.dumps(values))  # as it reads back (tuples become lists)


def check_backup(config):
    """Refuses, before any work, to resume the backup in `out` of a run with other settings.

    Returns:
        Whether `out` holds a backup of this same run (the run resumes from
        it).

    Raises:
        ValueError: the backup is another run's (its settings differ),
            naming each difference.
    """
    from keras_vit.training.recipes import FaultTolerantBackup

    folder = os.path.join(config.out, "backup")
    path = os.path.join(folder, FaultTolerantBackup.SETTINGS_FILE)
    if not os.path.isfile(path):
        return os.path.isdir(folder)  # a backup written before settings were stored resumes as it did
    with open(path) as handle:
        saved = json.load(handle)
    current = run_settings(config)
    differences = [
        f"{name} {saved.get(name)!r} -> {current.get(name)!r}"
        for name in sorted(set(saved) | set(current))
        if saved.get(name) != current.get(name)
    ]
    if differences:
        raise ValueError(
            f"{config.out} holds the backup of an unfinished run with other settings ({'; '.join(differences)}). "
            "Rerun that run's command to resume it, choose another --out, or delete "
            f"{folder} to start afresh."
        )
    return True


def make_callbacks(config):
    """Backup (resume after a kill), exact stop, checkpoint, released gradients, CSV log, throughput."""
    import keras

    from keras_vit import training
    from keras_vit.training import multihost

    primary = multihost.is_primary()  # the one writer of a multi-process run
    history_path = os.path.join(config.out, "history.csv")
    if primary and os.path.exists(history_path) and not os.path.isdir(os.path.join(config.out, "backup")):
        os.remove(history_path)  # left by a finished earlier run: start the log afresh
    # After the backup's restore: a run resumed mid-epoch repeats that epoch's
    # batches from its start, and stops once the planned updates are done.
    stop = training.StopAtIteration(config.steps)
    throughput = training.ThroughputMeter()
    callbacks = [
        training.FaultTolerantBackup(
            os.path.join(config.out, "backup"),
            save_freq=config.backup_every or "epoch",
            run_settings=run_settings(config),
        ),
        stop,
        throughput,
        training.AtomicModelCheckpoint(os.path.join(config.out, "checkpoint.keras")),
        training.ReleaseGradients(),  # torch: the old gradients out of the next step's peak
    ]
    if primary:
        # Last: the callbacks before it read the model on every process
        # (on JAX, a step all processes take together).
        callbacks.append(keras.callbacks.CSVLogger(history_path, append=True))
    return Callbacks(callbacks, stop, throughput, history_path)


def train(config, model, datasets, callbacks):
    """Runs `fit`; returns its wall time in seconds (compilation included)."""
    start = time.perf_counter()
    model.fit(
        datasets.train,
        epochs=config.epochs,
        steps_per_epoch=config.batches_per_epoch,
        validation_data=datasets.eval,
        callbacks=callbacks.all,
        shuffle=False,  # the pipeline shuffles; Keras warns that it cannot
        verbose=config.verbose,
    )
    return time.perf_counter() - start


def unreadable_files(config, datasets, start_step):
    """`(training, held-out)` lists of the image files that failed to decode (`data.SourceInfo.skipped`).

    The evaluation reads every held-out file; the training files are all
    known once this run has read as many images as the training split has.
    """
    from keras_vit.training import multihost

    batches = (config.steps - start_step) * config.accumulation_steps
    images_read = batches * multihost.per_process_batch_size(config.fit_batch_size)
    read_all = images_read >= (datasets.train_info.num_examples or 0)
    return (datasets.train_info.skipped() if read_all else []), datasets.eval_info.skipped()


def _decoded_examples(info, unreadable):
    return None if info.num_examples is None else info.num_examples - len(unreadable)


def write_report(config, model, datasets, callbacks, setup, fit_seconds, total_seconds):
    """Evaluates, saves the model, draws the curves, writes `metrics.json`; returns the metrics."""
    import keras

    from keras_vit.evaluation import heldout
    from keras_vit.training import multihost

    processes = multihost.process_info()
    if processes.count > 1 and processes.is_primary:
        start = callbacks.stop.start_iteration
        print(f"{processes.count} processes: started at step {start}", flush=True)
    evaluation = model.evaluate(datasets.eval, verbose=0, return_dict=True)
    # Top-5, per class, calibration: one more pass; each process holds only its slice of a multi-process eval.
    report = heldout.dataset_report(model, datasets.eval, datasets.class_names) if processes.count == 1 else None
    model_name, curves_name, metrics_name = "model.keras", "training_curves.png", "metrics.json"
    model_path, curves_path = os.path.join(config.out, model_name), os.path.join(config.out, curves_name)
    train_unreadable, heldout_unreadable = unreadable_files(config, datasets, callbacks.stop.start_iteration)
    images_per_second = callbacks.throughput.batches_per_second
    if images_per_second is not None:
        images_per_second = round(images_per_second * config.fit_batch_size, 1)
    metrics = {
        "heldout_accuracy": float(evaluation["accuracy"]),
        "heldout_loss": float(evaluation["loss"]),
        "heldout_examples": _decoded_examples(datasets.eval_info, heldout_unreadable),
        "train_examples": _decoded_examples(datasets.train_info, train_unreadable),
        "unreadable_files": sorted(train_unreadable + heldout_unreadable),
        "class_names": list(datasets.class_names) if datasets.class_names else None,
        "steps": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),  # optimizer updates
        "start_step": callbacks.stop.start_iteration,  # > 0 when resumed from a backup
        "batch_size": config.batch_size,
        # Training batches of this process only: the first call of the train
        # function (tracing, compilation) and the evaluations are left out.
        "images_per_second": images_per_second,
        "fit_seconds": round(fit_seconds, 2),
        "total_seconds": round(total_seconds, 2),
        "model": config.model,
        "weights": config.weights,
        "data": config.data,
        "image_size": config.image_size,
        "epochs": config.epochs,
        "optimizer": config.optimizer,
        "learning_rate": config.learning_rate,
        "layer_decay": config.layer_decay,
        "mixup": config.mixup,
        "cutmix": config.cutmix,
        "remat": config.remat,
        "patch_dropout": config.patch_dropout,
        "precision": setup.precision,
        "replicas": setup.num_replicas,
        "processes": processes.count,
        "backend": keras.backend.backend(),
        "model_path": model_path,
        "curves_path": curves_path,
        "heldout_report": report,
    }
    names = [model_name, curves_name, metrics_name] + ([CONFUSION_NAME] if report else [])

    def write_files():
        # Staged together and renamed into place one after the other: a failure leaves the old results.
        with files.atomic_files(config.out, names) as staged:
            model.save(staged[model_name])
            plot_curves(read_history(callbacks.history_path), staged[curves_name])
            files.write_json(staged[metrics_name], metrics)
            if report:
                heldout.plot_confusion(report, staged[CONFUSION_NAME])

    # One writer; the other processes wait for it (and fail if it fails).
    multihost.run_on_primary(write_files, f"write the results to {config.out}")
    return metrics


def check_dependencies(config):
    """Raises `MissingDependencyError` (naming the extra) before any work if the run lacks an optional package.

    tf.data (TensorFlow) and the digits' scikit-learn or TFDS come with the
    `data` extra; the curves' matplotlib with `inspect`. Checked first: a
    run must not train for an hour and then fail to draw its curves.
    """
    from keras_vit.training import data

    data.check_dependencies(config.data)
    extras.check("matplotlib", needed_for="the finetune job's training curves", extra="inspect")


def finetune(**options):
    start = time.perf_counter()
    import keras

    from keras_vit.training import distribute, multihost

    config = make_config(**options)
    check_dependencies(config)
    check_backup(config)
    # Joining the other processes (if any) comes before any JAX work.
    multihost.initialize(
        config.coordinator,
        config.num_processes,
        config.process_id,
        seed=config.seed,
        heartbeat_timeout=config.heartbeat_timeout,
    )
    keras.utils.set_random_seed(config.seed)
    setup = distribute.configure(config.strategy, config.precision)
    distribute.replicas_for(config.fit_batch_size, setup.num_replicas)
    datasets = make_datasets(config)
    os.makedirs(config.out, exist_ok=True)  # after the data's checks: a refused run leaves no empty --out
    model = compile_model(config, setup, datasets.train_info.num_classes, datasets.class_names)
    callbacks = make_callbacks(config)
    fit_seconds = train(config, model, datasets, callbacks)
    return write_report(config, model, datasets, callbacks, setup, fit_seconds, time.perf_counter() - start)


# `help()` shows the settings as the keyword arguments of both; the `Args:` come from their declarations.
make_config.__signature__ = finetune.__signature__ = settings.signature()
finetune.__doc__ = docstrings.render(
    """Trains (default) or fine-tunes a ViT and writes model, metrics and curves.

The steps, each a public function testable alone: `make_config` (defaults
and checks) -> `distribute.configure` -> `make_datasets` ->
`compile_model` -> `make_callbacks` -> `train` -> `write_report`.

The arguments are the settings of `keras_vit.training.settings.SETTINGS`,
also the `keras-vit finetune` flags. A multi-process run (JAX backend;
`coordinator`, `num_processes`, `process_id`: see
`keras_vit.training.multihost.initialize`) runs the same command in every process;
`batch_size` stays the global batch, split evenly between the processes,
and process 0 writes the files, so `out` must be a folder all processes see.

{args}

Returns:
    The metrics dict also written to `metrics.json` (on every process).
""",
    finetune,
    settings.args_entries(),
)
