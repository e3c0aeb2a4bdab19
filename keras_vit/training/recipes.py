"""Training recipes: the paper's schedules, optimizers, losses and callbacks.

* `finetune_optimizer`: the official fine-tune recipe (Dosovitskiy et al.
  2021, Appendix B.1.1; vit_jax `configs/common.py`): SGD with momentum 0.9,
  no weight decay, global-norm clipping at 1.0, linear warmup then cosine
  decay to 1e-5, and gradient accumulation to reach batch 512 on small
  hardware.
* `pretrain_optimizer`: the pre-training recipe: Adam(W) with beta
  (0.9, 0.999), weight decay 0.1 on the kernels only (not biases, norms, the
  class token or the position embedding), warmup then linear decay.
* Both take an optional `layer_decay` (layer-wise learning-rate decay, see
  `keras_vit.training.layer_decay`).
* `classification_loss`: cross-entropy with optional label smoothing.
* `FaultTolerantBackup`, `atomic_save_model`: checkpoints that a SIGKILL
  cannot leave half-written.

Everything here is backend-agnostic Keras.
"""

import math
import os
import threading
import time

import keras
from keras import ops

from keras_vit.training import layer_decay as layer_decay_lib
from keras_vit.training import multihost
from keras_vit.utils import files, keras_compat, serialization

# Variable names (`variable.name`, the last part of the path) that are not
# decayed: biases, LayerNorm scale/offset, the class token and the position
# embedding (big_vision and timm exclude the same set). Keras matches these
# against `variable.name`, which is "bias" on JAX and PyTorch but the
# tf.Variable's "encoder_norm/bias:0" on TensorFlow: hence the optional
# prefix and ":0" suffix.
NO_WEIGHT_DECAY_NAMES = tuple(rf"(^|/){name}(:\d+)?$" for name in ("bias", "gamma", "beta", "token", "embedding"))


DECAYS = ("cosine", "linear")


def _check_schedule(peak, total_steps, warmup_steps, end):
    if not (isinstance(total_steps, int) and isinstance(warmup_steps, int) and 0 <= warmup_steps < total_steps):
        raise ValueError(
            "`warmup_steps` and `total_steps` must be integers with 0 <= warmup_steps < total_steps. "
            f"Received: warmup_steps={warmup_steps!r}, total_steps={total_steps!r}"
        )
    if not 0 <= end <= peak:
        raise ValueError(f"Need 0 <= end <= peak. Received: peak={peak}, end={end}")


def warmup_decay(peak, total_steps, warmup_steps, end=0.0, decay="cosine"):
    """Linear warmup from 0 to `peak`, then cosine or linear decay to `end`.

    Args:
        peak: float, the learning rate after warmup.
        total_steps: int, the length of the schedule in optimizer iterations.
        warmup_steps: int, the warmup length (< `total_steps`).
        end: float, the learning rate at `total_steps` and after.
        decay: `"cosine"` (fine-tuning) or `"linear"` (pre-training).

    Returns:
        A `WarmupDecay`.

    Example:

    >>> schedule = warmup_decay(0.03, total_steps=100, warmup_steps=10, end=1e-5)
    >>> round(float(schedule(10)), 4), round(float(schedule(55)), 4), round(float(schedule(100)), 6)
    (0.03, 0.015, 1e-05)
    """
    return WarmupDecay(peak, total_steps, warmup_steps, end=end, decay=decay)


@serialization.register
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `peak`, then cosine or linear decay to `end`.

    The cosine schedule has the values of Keras's `CosineDecay` with
    `warmup_target=peak` and `alpha=end / peak`, but picks between warmup and
    decay with `ops.where`: Keras's `ops.cond` is a Python `if` on a tensor
    on the torch backend, which reads the step back to the host at every
    update (the device idles while it waits).

    Args:
        peak: float, the learning rate after warmup.
        total_steps: int, the length of the schedule in optimizer iterations.
        warmup_steps: int, the warmup length (< `total_steps`).
        end: float, the learning rate at `total_steps` and after.
        decay: `"cosine"` or `"linear"` (the default, for configs saved
            before cosine decay was built here).

    Example:

    >>> schedule = WarmupDecay(0.03, total_steps=100, warmup_steps=10, end=1e-5)
    >>> round(float(schedule(10)), 4), round(float(schedule(55)), 4), round(float(schedule(100)), 6)
    (0.03, 0.015, 1e-05)
    """

    def __init__(self, peak, total_steps, warmup_steps, end=0.0, decay="linear"):
        if decay not in DECAYS:
            raise ValueError(f"`decay` must be one of {DECAYS}. Received: decay={decay!r}")
        _check_schedule(peak, total_steps, warmup_steps, end)
        self.peak = float(peak)
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps
        self.end = float(end)
        self.decay = decay

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warmup = self.peak * step / max(self.warmup_steps, 1)
        progress = ops.clip((step - self.warmup_steps) / (self.total_steps - self.warmup_steps), 0.0, 1.0)
        if self.decay == "cosine":
            remaining = 0.5 * (1.0 + ops.cos(math.pi * progress))
        else:
            remaining = 1.0 - progress
        decayed = self.end + (self.peak - self.end) * remaining
        return ops.where(step < self.warmup_steps, warmup, decayed)

    def get_config(self):
        return {
            "peak": self.peak,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "end": self.end,
            "decay": self.decay,
        }


def _accumulation(accumulation_steps):
    if isinstance(accumulation_steps, bool) or not isinstance(accumulation_steps, int) or accumulation_steps < 1:
        raise ValueError(
            f"`accumulation_steps` must be a positive integer. Received: accumulation_steps={accumulation_steps!r}"
        )
    # Keras wants None (not 1) for "no accumulation".
    return accumulation_steps if accumulation_steps > 1 else None


@serialization.register
class SyncFreeSGD(keras_compat.SyncFreeSGDUpdate, keras.optimizers.SGD):
    """`keras.optimizers.SGD` whose update never reads the learning rate back to the host.

    The same arguments, the same updates and the same config as
    `keras.optimizers.SGD`. On the torch backend Keras's SGD turns the
    learning rate into a Python number at every update (twice with
    momentum): each time the host waits for the device to finish the
    backward pass, and under `torch.compile` each is a graph break. This one
    keeps the rate on the device, so the host queues the next step while
    the device computes this one. On jax and tensorflow it is Keras's SGD.
    `finetune_optimizer` returns one.

    Example:

    >>> optimizer = SyncFreeSGD(learning_rate=0.1, momentum=0.9)
    >>> variable = keras.Variable([1.0, 2.0])
    >>> _ = optimizer.apply_gradients([(ops.convert_to_tensor([1.0, -1.0]), variable)])
    >>> [round(value, 4) for value in ops.convert_to_numpy(variable).tolist()]
    [0.9, 2.1]
    """


def _optimizer(base, layerwise, layer_decay, model, **kwargs):
    """`base(**kwargs)`, or its layer-wise variant when `layer_decay` is set."""
    if layer_decay is None:
        return base(**kwargs)
    if model is None:
        raise ValueError(
            "`layer_decay` needs the `model` whose encoder blocks it decays: pass `model=...` (build the model "
            f"first). Received: layer_decay={layer_decay!r}, model=None"
        )
    multipliers = layer_decay_lib.layer_decay_multipliers(model, layer_decay)
    return layerwise(learning_rate_multipliers=multipliers, **kwargs)


def finetune_optimizer(
    learning_rate=0.03,
    total_steps=10_000,
    warmup_steps=500,
    end_learning_rate=1e-5,
    momentum=0.9,
    clipnorm=1.0,
    accumulation_steps=1,
    layer_decay=None,
    model=None,
):
    """The official fine-tune optimizer: SGD + momentum, clipping, warmup + cosine.

    Args:
        learning_rate: float, the peak learning rate (0.03 in the paper; 0.01
            for B/16 on CIFAR-10).
        total_steps: int, optimizer updates (10k for CIFAR, 20k for ImageNet).
        warmup_steps: int, linear-warmup updates (500).
        end_learning_rate: float, the rate the cosine ends at (1e-5).
        momentum: float (0.9).
        clipnorm: float, global gradient-norm clip (1.0); `None` disables it.
        accumulation_steps: int, batches whose gradients are averaged per
            update: batch 512 on small hardware is 8 x 64 with 8 here.
        layer_decay: optional float in (0, 1]: layer-wise learning-rate
            decay (not in the paper's recipe; 0.65-0.75 is usual for B/16).
        model: the model to fine-tune; required with `layer_decay`.

    Returns:
        A `SyncFreeSGD` (`keras_vit.training.layer_decay.LayerwiseSGD` with
        `layer_decay`), a `keras.optimizers.SGD`. With accumulation the schedule counts
        batches (Keras schedules see every batch), so its lengths are scaled
        by `accumulation_steps` here: `total_steps` stays in updates.
    """
    accumulation = _accumulation(accumulation_steps)
    factor = accumulation or 1
    schedule = warmup_decay(
        learning_rate, total_steps * factor, warmup_steps * factor, end=end_learning_rate, decay="cosine"
    )
    return _optimizer(
        SyncFreeSGD,
        layer_decay_lib.LayerwiseSGD,
        layer_decay,
        model,
        learning_rate=schedule,
        momentum=momentum,
        global_clipnorm=clipnorm,
        gradient_accumulation_steps=accumulation,
    )


def pretrain_optimizer(
    learning_rate=1e-3,
    total_steps=100_000,
    warmup_steps=10_000,
    weight_decay=0.1,
    beta_1=0.9,
    beta_2=0.999,
    end_learning_rate=0.0,
    clipnorm=1.0,
    accumulation_steps=1,
    layer_decay=None,
    model=None,
):
    """The pre-training optimizer: AdamW, warmup + linear decay, selective decay.

    Weight decay applies to kernels only: biases, LayerNorm parameters, the
    class token and the position embedding are excluded by name
    (`NO_WEIGHT_DECAY_NAMES`).

    Args:
        learning_rate: float, the peak learning rate.
        total_steps: int, optimizer updates.
        warmup_steps: int (10k in the paper).
        weight_decay: float (0.1).
        beta_1, beta_2: Adam moments (0.9, 0.999).
        end_learning_rate: float, the final learning rate.
        clipnorm: float, global gradient-norm clip; `None` disables it.
        accumulation_steps: int, batches per update.
        layer_decay: optional float in (0, 1], layer-wise learning-rate decay
            (for fine-tuning with this optimizer).
        model: the model to train; required with `layer_decay`.

    Returns:
        A `keras.optimizers.AdamW` (`keras_vit.training.layer_decay.LayerwiseAdamW`
        with `layer_decay`).
    """
    accumulation = _accumulation(accumulation_steps)
    factor = accumulation or 1
    schedule = warmup_decay(
        learning_rate, total_steps * factor, warmup_steps * factor, end=end_learning_rate, decay="linear"
    )
    optimizer = _optimizer(
        keras.optimizers.AdamW,
        layer_decay_lib.LayerwiseAdamW,
        layer_decay,
        model,
        learning_rate=schedule,
        weight_decay=weight_decay,
        beta_1=beta_1,
        beta_2=beta_2,
        global_clipnorm=clipnorm,
        gradient_accumulation_steps=accumulation,
    )
    optimizer.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY_NAMES))
    return optimizer


def decays_weight(optimizer, variable):
    """Whether `optimizer` applies weight decay to `variable` (for checks)."""
    return keras_compat.uses_weight_decay(optimizer, variable)


def classification_loss(label_smoothing=0.0, from_logits=True, one_hot=False):
    """Cross-entropy for integer (or one-hot, with MixUp/CutMix) labels.

    Label smoothing needs one-hot targets in Keras; with integer labels and
    smoothing, the sparse loss is replaced by an equivalent smoothed one.

    Args:
        label_smoothing: float in [0, 1).
        from_logits: bool, whether the model outputs logits.
        one_hot: bool, whether the labels are one-hot already.

    Returns:
        A `keras.losses.Loss`.
    """
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"`label_smoothing` must be in [0, 1). Received: label_smoothing={label_smoothing}")
    if one_hot:
        return keras.losses.CategoricalCrossentropy(from_logits=from_logits, label_smoothing=label_smoothing)
    if label_smoothing == 0.0:
        return keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits)
    return SparseSmoothedCrossentropy(label_smoothing=label_smoothing, from_logits=from_logits)


@serialization.register
class SparseSmoothedCrossentropy(keras.losses.Loss):
    """Label-smoothed cross-entropy for integer labels.

    The same value as `CategoricalCrossentropy(label_smoothing=s)` on one-hot
    labels, without one-hot labels in the pipeline.

    Args:
        label_smoothing: float in [0, 1).
        from_logits: bool.
    """

    def __init__(self, label_smoothing=0.1, from_logits=True, name="sparse_smoothed_crossentropy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.label_smoothing = float(label_smoothing)
        self.from_logits = from_logits

    def call(self, y_true, y_pred):
        num_classes = ops.shape(y_pred)[-1]
        y_true = ops.one_hot(ops.cast(ops.reshape(y_true, (-1,)), "int32"), num_classes, dtype=y_pred.dtype)
        return keras.losses.categorical_crossentropy(
            y_true, y_pred, from_logits=self.from_logits, label_smoothing=self.label_smoothing
        )

    def get_config(self):
        config = super().get_config()
        config.update({"label_smoothing": self.label_smoothing, "from_logits": self.from_logits})
        return config


def atomic_save_model(model, path):
    """`model.save(path)` through a temporary file and an atomic rename (`keras_vit.utils.files`)."""
    with files.atomic_file(path) as staged:
        model.save(staged)


class FaultTolerantBackup(keras_compat.AtomicBackupWrites, keras.callbacks.BackupAndRestore):
    """`BackupAndRestore` whose files are replaced atomically.

    Keras writes the backup straight into place, so a SIGKILL during the
    write leaves a truncated file. Here each file is written to a temporary
    name and renamed into place (`keras_vit.utils.files`): a killed run always
    finds complete files and resumes from them when restarted with the same
    command. Keras restores the epoch and the
    weights and optimizer state (so the schedule); an epoch interrupted
    midway is run again from its start (`StopAtIteration` keeps the total
    number of updates to the plan).

    Args:
        backup_dir: str, the folder of the backup.
        save_freq: `"epoch"` or an int number of batches.
        delete_checkpoint: bool, delete the backup when training finishes.
        run_settings: optional JSON-ready dict of what defines the run,
            written with every backup as `run_settings.json` so that a
            restart can tell whether it is the same run (`keras-vit finetune`
            refuses to resume another run's backup).
    """

    SETTINGS_FILE = "run_settings.json"

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True, run_settings=None):
        super().__init__(backup_dir, save_freq=save_freq, delete_checkpoint=delete_checkpoint, double_checkpoint=False)
        self.run_settings = run_settings

    @property
    def async_safe(self):
        # Saving once per epoch, the batch end does nothing, so Keras may run it on its thread pool, where it reads
        # the step's logs without stopping the training thread (see `ThroughputMeter`). Saving every N batches
        # must run on the training thread: the weights would go on changing under the save.
        return self.save_freq == "epoch"

    # In a multi-process run (`keras_vit.training.multihost`) process 0 alone writes
    # and deletes the backup; every process restores from it, so the folder
    # must be one that all processes see.

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        step = int(ops.convert_to_numpy(self.model.optimizer.iterations))
        multihost.check_same(f"the step restored from {self.backup_dir}", step)

    def on_train_end(self, logs=None):
        if multihost.is_primary():
            super().on_train_end(logs)

    def write_backup(self, weights_path, metadata_path, metadata):
        self.model  # noqa: B018 (on JAX, reading it gathers the training state, on every process)
        multihost.run_on_primary(
            lambda: self._write_files(weights_path, metadata_path, metadata), f"write the backup in {self.backup_dir}"
        )

    def _write_files(self, weights_path, metadata_path, metadata):
        # Each file is renamed into place whole, the metadata after the weights: a kill between the two renames
        # pairs the new weights (and optimizer step) with the previous epoch, from which the run resumes.
        folder = os.path.dirname(os.path.abspath(weights_path))
        names = [os.path.basename(weights_path), os.path.basename(metadata_path)]
        names += [self.SETTINGS_FILE] if self.run_settings is not None else []
        with files.atomic_files(folder, names) as staged:
            self.model.save_weights(staged[names[0]])
            files.write_json(staged[names[1]], metadata)
            if self.run_settings is not None:
                files.write_json(staged[self.SETTINGS_FILE], self.run_settings)


class StopAtIteration(keras.callbacks.Callback):
    """Ends `fit` once `optimizer.iterations` reaches `iterations`.

    Keras's `BackupAndRestore` restores the weights, the optimizer (so its
    iteration count and the learning-rate schedule) and the epoch number, but
    not the position inside an epoch: a run killed mid-epoch repeats that
    epoch from its start. Stopping on the restored count makes the resumed
    run end after exactly the planned number of updates, at the end of the
    schedule (Keras still evaluates and ends the epoch it stops in). Put it
    after the backup callback so that it reads the restored count.

    The count is read once, when training begins, and the batches are
    counted from there: reading the optimizer every batch would force the
    JAX backend to write its whole training state back to the variables
    (`Callback.model` does that) after every step. They are counted when
    each train call begins (a call runs `steps_per_execution` batches,
    those Keras reports when it ends), so that the callback has no batch
    end: Keras reads every step's logs back on the training thread, a device
    synchronization per step on a GPU, as soon as one callback defines
    `on_train_batch_end` without being `async_safe`.

    Args:
        iterations: int, the optimizer updates of the whole run (Keras's
            `optimizer.iterations` counts updates, not accumulated batches).
    """

    def __init__(self, iterations):
        super().__init__()
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
            raise ValueError(f"`iterations` must be a positive integer. Received: iterations={iterations!r}")
        self.iterations = iterations
        self.start_iteration = 0
        self._batches_left = 0
        self._last_batch = -1
        self._batches_per_call = 1

    def on_train_begin(self, logs=None):
        model = self.model
        optimizer = model.optimizer
        self.start_iteration = int(ops.convert_to_numpy(optimizer.iterations))
        self._batches_per_call = getattr(model, "steps_per_execution", None) or 1
        # A backup taken inside an accumulation cycle leaves a few batches in
        # the accumulators; counting whole updates from the restored count
        # lets them run without an extra update.
        self._batches_left = (self.iterations - self.start_iteration) * (optimizer.gradient_accumulation_steps or 1)

    def on_epoch_begin(self, epoch, logs=None):
        self._last_batch = -1

    def on_train_batch_begin(self, batch, logs=None):
        # The call's last index, which Keras passes to `on_train_batch_end` (the full count, also for an epoch's
        # last call when its data runs out first); Keras ends `fit` after the call that sets `stop_training`.
        last = batch + self._batches_per_call - 1
        self._batches_left -= last - self._last_batch
        self._last_batch = last
        if self._batches_left <= 0:
            self.model.stop_training = True


class ThroughputMeter(keras.callbacks.Callback):
    """Measures training batches per second without compilation or evaluation.

    Each epoch counts from its start to the end of its last train call,
    except the run's first call, which traces and compiles the train
    function: the first epoch counts from the start of the second call, and
    the first call's batches do not count. Time between epochs (evaluation,
    checkpoints, backups) is never counted.

    `async_safe`: Keras reads every step's logs back on the training thread
    (a device synchronization per step on a GPU) as soon as one callback
    needs its batch end there. This one lets Keras's thread pool run it,
    where the logs are read while the next steps run, so batch ends come
    late and in any order: a call's end is the latest time any batch end
    was seen, under a lock, and the starts are taken on the training thread.

    Attributes:
        batches: int, the batches measured.
        seconds: float, the time they took.
        batches_per_second: float, or `None` before two calls have run.
    """

    async_safe = True

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()
        self._epochs = []  # per epoch: [its start, the last batch index ended, the latest end]
        self._calls = 0  # the run's calls begun, counted up to 2
        self._first_epoch = None  # the epoch of the run's first call
        self._second_call = None  # (its first batch index, its start), when in the first call's epoch

    def on_epoch_begin(self, epoch, logs=None):
        # Keras has run the previous epoch's batch ends by now (it waits for them before `on_epoch_end`).
        with self._lock:
            self._epochs.append([time.perf_counter(), -1, None])

    def on_train_batch_begin(self, batch, logs=None):
        if self._calls >= 2:  # only the run's first two calls are needed: nothing per step after them
            return
        now = time.perf_counter()
        with self._lock:
            self._calls += 1
            if self._calls == 1:
                self._first_epoch = len(self._epochs) - 1
            elif self._first_epoch == len(self._epochs) - 1:
                self._second_call = (batch, now)

    def on_train_batch_end(self, batch, logs=None):
        # With `steps_per_execution`, `batch` is the last index of the call.
        now = time.perf_counter()
        with self._lock:
            epoch = self._epochs[-1]
            epoch[1], epoch[2] = max(epoch[1], batch), max(epoch[2] or now, now)

    def _measured(self):
        """`(batches, seconds)` over the epochs so far."""
        with self._lock:
            epochs = [list(epoch) for epoch in self._epochs]
            first_epoch, second_call = self._first_epoch, self._second_call
        batches, seconds = 0, 0.0
        for index, (start, last, end) in enumerate(epochs):
            if end is None:
                continue
            first = 0
            if index == first_epoch:  # the run's first call compiles: count from the second one's start
                if second_call is None:
                    continue
                first, start = second_call
            batches += last + 1 - first
            seconds += end - start
        return batches, seconds

    @property
    def batches(self):
        return self._measured()[0]

    @property
    def seconds(self):
        return self._measured()[1]

    @property
    def batches_per_second(self):
        batches, seconds = self._measured()
        return batches / seconds if batches and seconds > 0 else None


class ReleaseGradients(keras.callbacks.Callback):
    """Frees each training step's gradients once the optimizer has applied them (torch backend).

    Keras's torch `train_step` clears the previous step's gradients
    (`zero_grad`) only after its forward pass, so a whole set of gradients,
    as large as the trainable weights (330 MiB for ViT-B/16 in float32), is
    alive through every forward pass and into the backward pass, where the
    step's memory peaks. Nothing reads them after the update: the next
    backward pass writes new ones. Dropping them at the end of each train
    call takes them out of the peak and changes no result. TensorFlow and JAX
    keep no gradients between steps; there the callback does nothing.

    They are released when the next batch begins (and when training ends),
    not when this one ends: Keras reads a step's logs back to the host for
    its batch-end callbacks, a device synchronization in every step, unless
    no callback defines `on_train_batch_end` (it then reads them on another
    thread, and the host queues the next step while the device computes
    this one). A batch-begin callback leaves that to the others.

    `keras-vit finetune` adds it. With `steps_per_execution > 1` only the
    last step of each call is released.

    Example:

    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> history = model.fit(np.ones((8, 4)), np.zeros((8, 2)), verbose=0, callbacks=[ReleaseGradients()])
    """

    def on_train_batch_begin(self, batch, logs=None):
        self._release()

    def on_train_end(self, logs=None):
        self._release()

    def _release(self):
        if keras.backend.backend() == "torch":
            # What Keras's own train step does before its backward pass (torch's `set_to_none=True`).
            self.model.zero_grad(set_to_none=True)


class AtomicModelCheckpoint(keras.callbacks.Callback):
    """Saves the whole model (`.keras`) every epoch, atomically.

    Args:
        filepath: str, the `.keras` path (overwritten each time).
    """

    def __init__(self, filepath):
        super().__init__()
        if not str(filepath).endswith(".keras"):
            raise ValueError(f"`filepath` must end in .keras. Received: filepath={filepath!r}")
        self.filepath = str(filepath)

    def on_epoch_end(self, epoch, logs=None):
        model = self.model  # on every process (see `multihost.run_on_primary`)
        multihost.run_on_primary(lambda: atomic_save_model(model, self.filepath), f"write {self.filepath}")
