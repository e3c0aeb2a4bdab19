"""The `keras-vit finetune` job: train or fine-tune a ViT and write its results (see `docs/finetune.md`)."""

import collections
import csv
import dataclasses
import json
import math
import os
import time

import numpy as np

from keras_vit.training import settings
from keras_vit.training.settings import DIGITS, SMALL_MODEL
from keras_vit.utils import docstrings, extras, files

# The default job's model: 16x16 digits in 4x4 patches, 4 blocks of width 64 (>= 97 % held-out accuracy).
SMALL_CONFIG = dict(patch_size=4, hidden_dim=64, num_layers=4, num_heads=4, mlp_dim=128)
DIGITS_IMAGE_SIZE = 16
DIGITS_HOLDOUT_FRACTION = 0.2
CONFUSION_NAME = "confusion_matrix.png"
# The settings `metrics.json` repeats.
REPORTED_SETTINGS = (
    "model weights data image_size naflex epochs optimizer learning_rate layer_decay mixup cutmix remat patch_dropout "
    "lora"
).split()
_UNMIXABLE = "images of different patch grids cannot be mixed"
# Settings that do not change what is trained: a backup resumes whatever they are.
_NOT_THE_RUN = ("out", "verbose", "backup_every", "coordinator", "num_processes", "process_id", "heartbeat_timeout")


def digits_sources(seed=0):
    """The scikit-learn digits as `(train, eval)` sources of `keras_vit.training.data`, pixels in 0-255."""
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


def training_model(config, num_classes):
    """The small digits model or `config.model`'s constructor, with a logits head (and LoRA adapters)."""
    import keras_vit

    options = dict(
        include_top=True,  # a backbone checkpoint gets a new head
        input_shape=(config.image_size, config.image_size, 3),
        classes=num_classes,
        classifier_activation=None,
        remat=config.remat,
        patch_dropout_rate=config.patch_dropout,
        lora_rank=config.lora,
    )
    if config.naflex is not None:
        # Each image has its own grid; the position table (a checkpoint's own, else about N patches) is resized to it.
        side = math.isqrt(config.naflex)
        options.update(input_shape=(None, None, 3), max_num_patches=config.naflex, embedding_grid=(side, side))
    if config.model == SMALL_MODEL:
        if config.weights is not None:
            raise ValueError(f"--model {SMALL_MODEL} has no pretrained weights. Received: weights={config.weights!r}")
        return keras_vit.VisionTransformer(**SMALL_CONFIG, name="vit_small_digits", **options)
    try:
        constructor = keras_vit.models.applications.constructor_for(config.model)
    except ValueError as error:
        raise ValueError(f"{error} Or {SMALL_MODEL!r}, the default digits model.") from None
    # A new number of classes gets the paper's zero-initialised head, without pre_logits.
    return constructor(weights=config.weights, **options)


def read_history(path):
    """The columns of `history.csv`, one row per epoch (a repeated epoch keeps its last row); `NA` reads as NaN."""
    if not os.path.exists(path):
        return {}
    with open(path) as file:
        rows = {int(row["epoch"]): row for row in csv.DictReader(file)}
    history = {}
    for epoch in sorted(rows):
        for key, value in rows[epoch].items():
            history.setdefault(key, []).append(float("nan") if value in ("NA", "") else float(value))
    return history


def plot_curves(history, path):
    """Draws loss and accuracy per epoch (train and held-out) into a PNG."""
    from keras_vit.inspection import plots

    epochs = [e + 1 for e in history.get("epoch", [])]
    figure = plots.new_figure(10, 4, "the training curves")
    for axis, metric in zip(figure.subplots(1, 2), ("loss", "accuracy")):
        for key, label in ((metric, "train"), (f"val_{metric}", "held-out")):
            if key in history:
                axis.plot(epochs, history[key], marker="o", markersize=3, label=label)
        axis.set(xlabel="epoch", title=metric)
        axis.grid(alpha=0.3)
        axis.legend()
    plots.save_png(figure, path, dpi=100)


class _BatchLayout:
    """The batch layout `FinetuneConfig` derives from its settings."""

    @property
    def fit_batch_size(self):
        return self.batch_size // self.accumulation_steps

    @property
    def batches_per_epoch(self):
        return math.ceil(self.steps / self.epochs) * self.accumulation_steps

    @property
    def total_batches(self):
        return self.steps * self.accumulation_steps


FinetuneConfig = dataclasses.make_dataclass(
    "FinetuneConfig",
    [(setting.name, setting.type) for setting in settings.SETTINGS],
    bases=(_BatchLayout,),
    frozen=True,
    namespace={
        "__module__": __name__,
        "__doc__": "The settings of one run (one field per `settings.SETTINGS` entry), resolved by `make_config`.",
    },
)


def make_config(**options):
    """Checks `finetune`'s arguments and resolves their data-dependent defaults into a `FinetuneConfig`."""
    from keras_vit.training import multihost

    values = settings.parse(options)
    multihost.settings(values["coordinator"], values["num_processes"], values["process_id"])  # checked early
    digits, pretrained = values["data"] == DIGITS, values["weights"] is not None

    def default(name, value):
        if values[name] is None:
            values[name] = value
        return values[name]

    naflex = values["naflex"]
    if naflex is None:
        default("image_size", DIGITS_IMAGE_SIZE if digits else 224)
    refused = dict(image_size="each image keeps its own size", mixup=_UNMIXABLE, cutmix=_UNMIXABLE)
    refused.update(patch_dropout="the dropped tokens would leave the padding mask")
    for name, why in refused.items():
        if naflex is not None and values[name]:
            raise ValueError(f"`naflex={naflex}` cannot have `{name}`: {why}. Received: {name}={values[name]!r}")
    batch_size = default("batch_size", 64 if digits else 512)
    steps = default("steps", 1500 if digits else 10_000)
    epochs = default("epochs", min(20 if digits else 10, steps))
    if epochs > steps:
        raise ValueError(f"`epochs` must be at most `steps` ({steps}). Received: epochs={epochs}")
    values["epochs"] = math.ceil(steps / math.ceil(steps / epochs))  # only epochs that hold updates
    if batch_size % values["accumulation_steps"]:
        raise ValueError(
            f"`batch_size={batch_size}` must split into accumulation_steps={values['accumulation_steps']}."
        )
    if values["optimizer"] == "auto":
        values["optimizer"] = "sgd" if pretrained else "adamw"
    # SGD's 0.03 is the paper's rate at batch 512, scaled linearly.
    default("learning_rate", 0.03 * batch_size / 512 if values["optimizer"] == "sgd" else 2e-3)
    warmup_steps = default("warmup_steps", min(500, steps // 10))
    if warmup_steps >= steps:
        raise ValueError(f"`warmup_steps` must be less than `steps` ({steps}). Received: warmup_steps={warmup_steps}")
    default("label_smoothing", 0.0 if pretrained else 0.1)
    return FinetuneConfig(**values)


Datasets = collections.namedtuple("Datasets", ["train", "eval", "train_info", "eval_info"])


def load_sources(config):
    """The `(train, eval)` sources (`(dataset, SourceInfo)` pairs) of `config.data`, checked to be readable."""
    from keras_vit.training import data, multihost

    if config.data == DIGITS:
        train, held_out = digits_sources(config.seed)
    else:
        # Files and TFDS splits are sharded before decoding; the in-memory digits in the pipeline.
        train, held_out = data.load_splits(
            config.data,
            config.train_split,
            config.eval_split,
            data_dir=config.data_dir,
            validation_split=config.validation_split,
            seed=config.seed,
            shuffle_files=True,
            shard=multihost.data_shard(),
        )
    data.check_readable(*train)
    data.check_readable(*held_out)
    return train, held_out


def make_datasets(config, sources, patch_size=None):
    """The repeated training pipeline and the held-out one (one-hot labels with MixUp or CutMix) of `sources` (of
    `load_sources`), as `Datasets`; `patch_size`, the model's, cuts NaFlex batches (`config.naflex`).

    Each process of a multi-process run reads its shard of the training data and its slice of each held-out batch.
    """
    from keras_vit.training import data, multihost

    shard = multihost.data_shard()
    digits = config.data == DIGITS
    (train_source, train_info), (eval_source, eval_info) = sources
    naflex = None if config.naflex is None else (patch_size, config.naflex)
    train = data.train_pipeline(
        train_source,
        image_size=config.image_size,
        naflex=naflex,
        batch_size=multihost.per_process_batch_size(config.fit_batch_size),
        shard=shard if digits else None,
        num_classes=train_info.num_classes,
        # Digits are centred and small: a mild crop, no flip (a mirrored 2 is no 2).
        area_range=(0.85, 1.0) if digits else data.DEFAULT_AREA_RANGE,
        flip=not digits,
        randaugment=config.randaugment,
        mixup_alpha=config.mixup,
        cutmix_alpha=config.cutmix,
        cache=digits,
        repeat=True,
        seed=config.seed + multihost.process_info().index,
    )
    evaluation = data.eval_pipeline(
        eval_source,
        image_size=config.image_size,
        naflex=naflex,
        batch_size=config.fit_batch_size,
        cache=digits,
        static_shapes=shard is not None,
        num_examples=eval_info.num_examples,
    )
    if config.mixup or config.cutmix:
        import tensorflow as tf

        depth = train_info.num_classes
        evaluation = evaluation.map(lambda images, labels, *weights: (images, tf.one_hot(labels, depth), *weights))
    return Datasets(train, multihost.split_batches(evaluation), train_info, eval_info)


def steps_per_execution(config):
    """Batches per train call: up to 8 (1 on torch), dividing every epoch so that each ends on a call."""
    import keras

    max_per_call = 1 if keras.backend.backend() == "torch" else 8
    last_epoch = config.total_batches - (config.epochs - 1) * config.batches_per_epoch
    return max(d for d in range(1, max_per_call + 1) if config.batches_per_epoch % d == 0 and last_epoch % d == 0)


def compile_model(config, setup, num_classes, class_names):
    """Builds the model in `setup`'s scope, names its classes and compiles it."""
    from keras_vit import training
    from keras_vit.models import metadata

    with setup.scope():
        model = training_model(config, num_classes)
        if class_names:
            model = metadata.with_class_names(model, class_names)
        recipe = dict(
            learning_rate=config.learning_rate,
            total_steps=config.steps,
            warmup_steps=config.warmup_steps,
            accumulation_steps=config.accumulation_steps,
            layer_decay=config.layer_decay,
            model=model,
        )
        if config.optimizer == "sgd":
            optimizer = training.finetune_optimizer(**recipe)
        else:
            optimizer = training.pretrain_optimizer(weight_decay=0.05, end_learning_rate=1e-5, **recipe)
        model.compile(
            optimizer=optimizer,
            loss=training.classification_loss(config.label_smoothing, one_hot=bool(config.mixup or config.cutmix)),
            # Weighted: the padding of a static-shape evaluation has weight 0.
            weighted_metrics=["accuracy"],
            jit_compile=setup.jit_compile,
            steps_per_execution=steps_per_execution(config),
        )
    return model


def run_settings(config):
    """What defines a run, as stored with its backup (JSON values)."""
    values = {name: value for name, value in dataclasses.asdict(config).items() if name not in _NOT_THE_RUN}
    return json.loads(json.dumps(values))


def check_backup(config):
    """Refuses, before any work, to resume the backup in `out` of a run with other settings, naming each difference."""
    from keras_vit.training.recipes import FaultTolerantBackup

    folder = os.path.join(config.out, "backup")
    path = os.path.join(folder, FaultTolerantBackup.SETTINGS_FILE)
    if not os.path.isfile(path):
        return
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
            f"Rerun that run's command to resume it, choose another --out, or delete {folder} to start afresh."
        )


def make_callbacks(config):
    """Backup, exact stop, throughput, checkpoint, released gradients and (process 0) the CSV log."""
    import keras

    from keras_vit import training
    from keras_vit.training import multihost

    history_path = os.path.join(config.out, "history.csv")
    backup = os.path.join(config.out, "backup")
    if multihost.is_primary() and os.path.exists(history_path) and not os.path.isdir(backup):
        os.remove(history_path)  # a finished earlier run's: the log starts afresh
    callbacks = [
        training.FaultTolerantBackup(
            backup, save_freq=config.backup_every or "epoch", run_settings=run_settings(config)
        ),
        training.StopAtIteration(config.steps),  # after the restore
        training.ThroughputMeter(),
        training.AtomicModelCheckpoint(os.path.join(config.out, "checkpoint.keras")),
        training.ReleaseGradients(),
    ]
    if multihost.is_primary():
        # Last: the callbacks before it read the model on every process (on JAX, a step of all processes).
        callbacks.append(keras.callbacks.CSVLogger(history_path, append=True))
    return callbacks


def write_report(config, model, datasets, callbacks, setup, fit_seconds, total_seconds):
    """Evaluates, then writes the model, curves, confusion matrix and `metrics.json` as one set; returns the metrics."""
    import keras

    from keras_vit import training
    from keras_vit.evaluation import heldout
    from keras_vit.training import multihost

    (stop,) = [callback for callback in callbacks if isinstance(callback, training.StopAtIteration)]
    (meter,) = [callback for callback in callbacks if isinstance(callback, training.ThroughputMeter)]
    processes = multihost.process_info().count
    if processes > 1 and multihost.is_primary():
        print(f"{processes} processes: started at step {stop.start_iteration}", flush=True)
    evaluation = model.evaluate(datasets.eval, verbose=0, return_dict=True)
    # Each process holds only its slice of a multi-process evaluation.
    class_names = datasets.train_info.class_names
    report = heldout.dataset_report(model, datasets.eval, class_names) if processes == 1 else None
    # The training files are all known once as many images were read as the split has.
    images_read = (config.steps - stop.start_iteration) * config.batch_size // processes
    train_unreadable = datasets.train_info.skipped() if images_read >= (datasets.train_info.num_examples or 0) else []
    eval_unreadable = datasets.eval_info.skipped()
    speed = meter.batches_per_second
    names = ["model.keras", "training_curves.png", "metrics.json"] + ([CONFUSION_NAME] if report else [])

    def decoded(info, unreadable):
        return None if info.num_examples is None else info.num_examples - len(unreadable)

    metrics = {
        "heldout_accuracy": float(evaluation["accuracy"]),
        "heldout_loss": float(evaluation["loss"]),
        "heldout_examples": decoded(datasets.eval_info, eval_unreadable),
        "train_examples": decoded(datasets.train_info, train_unreadable),
        "unreadable_files": sorted(train_unreadable + eval_unreadable),
        "class_names": list(class_names) if class_names else None,
        "steps": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
        "start_step": stop.start_iteration,  # > 0 when resumed from a backup
        "batch_size": config.batch_size,
        # This process's training batches, without the compiling first call and the evaluations.
        "images_per_second": None if speed is None else round(speed * config.fit_batch_size, 1),
        "fit_seconds": round(fit_seconds, 2),
        "total_seconds": round(total_seconds, 2),
        **{name: getattr(config, name) for name in REPORTED_SETTINGS},
        "trainable_parameters": sum(math.prod(v.shape) for v in model.trainable_weights),
        "parameters": model.count_params(),
        "precision": setup.precision,
        "replicas": setup.num_replicas,
        "processes": processes,
        "backend": keras.backend.backend(),
        "model_path": os.path.join(config.out, names[0]),
        "curves_path": os.path.join(config.out, names[1]),
        "heldout_report": report,
    }

    def write_files():
        with files.atomic_files(config.out, names) as staged:
            model.save(staged[names[0]])
            plot_curves(read_history(os.path.join(config.out, "history.csv")), staged[names[1]])
            files.write_json(staged[names[2]], metrics)
            if report:
                heldout.plot_confusion(report, staged[CONFUSION_NAME])

    multihost.run_on_primary(write_files, f"write the results to {config.out}")
    return metrics


def finetune(**options):
    start = time.perf_counter()
    import keras

    from keras_vit.models import find_vit
    from keras_vit.training import data, distribute, multihost

    config = make_config(**options)
    # Missing packages and a foreign backup fail before any work: a run must not train an hour, then fail to draw.
    data.check_dependencies(config.data)
    extras.check("matplotlib", needed_for="the finetune job's training curves", extra="inspect")
    check_backup(config)
    # Joining the other processes (if any) comes before any JAX work.
    processes = (config.coordinator, config.num_processes, config.process_id)
    multihost.initialize(*processes, seed=config.seed, heartbeat_timeout=config.heartbeat_timeout)
    keras.utils.set_random_seed(config.seed)
    setup = distribute.configure(config.strategy, config.precision)
    distribute.replicas_for(config.fit_batch_size, setup.num_replicas)
    sources = load_sources(config)
    (_, train_info), _ = sources
    model = compile_model(config, setup, train_info.num_classes, train_info.class_names)
    datasets = make_datasets(config, sources, find_vit(model).patch_size)
    os.makedirs(config.out, exist_ok=True)  # after the data's and the model's checks: a refused run leaves no --out
    callbacks = make_callbacks(config)
    fit_start = time.perf_counter()
    model.fit(
        datasets.train,
        epochs=config.epochs,
        steps_per_epoch=config.batches_per_epoch,
        validation_data=datasets.eval,
        callbacks=callbacks,
        shuffle=False,  # the pipeline shuffles; Keras warns that it cannot
        verbose=config.verbose,
    )
    fit_seconds = time.perf_counter() - fit_start
    return write_report(config, model, datasets, callbacks, setup, fit_seconds, time.perf_counter() - start)


# `help()` shows the settings as keyword arguments of both, documented from their declarations.
make_config.__signature__ = finetune.__signature__ = settings.signature()
finetune.__doc__ = docstrings.render(
    """Trains (default) or fine-tunes a ViT and writes model, metrics and curves.

The arguments are the settings of `keras_vit.training.settings.SETTINGS`,
also the `keras-vit finetune` flags. A multi-process run (JAX backend; see
`keras_vit.training.multihost.initialize`) runs the same command in every
process; `batch_size` stays the global batch and process 0 writes the
files, so `out` must be a folder all processes see.

{args}

Returns:
    The metrics dict also written to `metrics.json` (on every process).
""",
    finetune,
    settings.args_entries(),
)
