"""The paper's training recipes (Dosovitskiy et al. 2021, Appendix B.1.1): schedules, optimizers, losses and
callbacks that write their files atomically, so that a killed run resumes."""

import math
import os
import time

import keras
from keras import ops

from keras_vit.models import lora
from keras_vit.training import multihost
from keras_vit.training.layer_decay import LayerwiseAdamW, LayerwiseSGD, layer_decay_multipliers
from keras_vit.utils import files, keras_compat, serialization, validation

# Not decayed: biases, norm and layer scales and offsets, the tokens and the position embedding (as in big_vision and
# timm). TensorFlow names a variable "encoder_norm/bias:0", JAX and torch "bias": hence the prefix and suffix.
NO_WEIGHT_DECAY_NAMES = tuple(
    rf"(^|/){name}(:\d+)?$" for name in ("bias", "gamma", "beta", "scale", r"layer_scale\d", "token", "embedding")
)


@serialization.register
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `peak`, then cosine or linear decay to `end`.

    `ops.where` picks the phase: `ops.cond` (as in Keras's `CosineDecay`) reads the step back to the host on torch.

    Args:
        peak: float, the learning rate after warmup.
        total_steps: int, the length of the schedule in optimizer iterations.
        warmup_steps: int, the warmup length (< `total_steps`).
        end: float, the learning rate at `total_steps` and after.
        decay: `"cosine"` (fine-tuning) or `"linear"` (pre-training).

    >>> schedule = WarmupDecay(0.03, total_steps=100, warmup_steps=10, end=1e-5)
    >>> round(float(schedule(10)), 4), round(float(schedule(55)), 4), round(float(schedule(100)), 6)
    (0.03, 0.015, 1e-05)
    """

    def __init__(self, peak, total_steps, warmup_steps, end=0.0, decay="cosine"):
        validation.one_of("decay", decay, ("cosine", "linear"))
        if not (isinstance(total_steps, int) and isinstance(warmup_steps, int) and 0 <= warmup_steps < total_steps):
            raise ValueError(f"Need integers 0 <= warmup_steps={warmup_steps!r} < total_steps={total_steps!r}.")
        if not 0 <= end <= peak:
            raise ValueError(f"Need 0 <= end <= peak. Received: peak={peak}, end={end}")
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
        return {name: getattr(self, name) for name in ("peak", "total_steps", "warmup_steps", "end", "decay")}


@serialization.register
class SyncFreeSGD(keras_compat.SyncFreeSGDUpdate, keras.optimizers.SGD):
    """`keras.optimizers.SGD` whose update on torch never reads the learning rate back to the host."""


def _optimizer(base, layerwise, schedule, accumulation_steps, layer_decay, model, **kwargs):
    """`base`, or `layerwise` with `layer_decay`, on a `WarmupDecay` counted in batches, as Keras counts."""
    validation.positive_int("accumulation_steps", accumulation_steps)
    peak, total_steps, warmup_steps, end, decay = schedule
    steps = (total_steps * accumulation_steps, warmup_steps * accumulation_steps)
    kwargs["learning_rate"] = WarmupDecay(peak, *steps, end=end, decay=decay)
    kwargs["gradient_accumulation_steps"] = accumulation_steps if accumulation_steps > 1 else None
    if layer_decay is None:
        return base(**kwargs)
    if model is None:
        raise ValueError(f"`layer_decay={layer_decay}` needs the built `model` whose blocks it decays: pass model=...")
    return layerwise(learning_rate_multipliers=layer_decay_multipliers(model, layer_decay), **kwargs)


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
    """The official fine-tune optimizer: SGD with momentum, clipping, warmup and cosine decay.

    Args:
        learning_rate: float, the peak learning rate (0.03 in the paper).
        total_steps: int, optimizer updates (10k for CIFAR, 20k for ImageNet).
        warmup_steps: int, linear-warmup updates.
        end_learning_rate: float, the rate the cosine ends at.
        momentum: float.
        clipnorm: float, global gradient-norm clip; `None` disables it.
        accumulation_steps: int, batches averaged per update (512 as 8 x 64).
        layer_decay: optional float in (0, 1], layer-wise learning-rate decay.
        model: the model to fine-tune; required with `layer_decay`.

    Returns:
        A `SyncFreeSGD`, or a `LayerwiseSGD` with `layer_decay`.
    """
    schedule = (learning_rate, total_steps, warmup_steps, end_learning_rate, "cosine")
    sgd = dict(momentum=momentum, global_clipnorm=clipnorm)
    return _optimizer(SyncFreeSGD, LayerwiseSGD, schedule, accumulation_steps, layer_decay, model, **sgd)


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
    """The pre-training optimizer: AdamW, warmup and linear decay, weight decay on kernels only.

    Args:
        weight_decay: float, applied to kernels only (`NO_WEIGHT_DECAY_NAMES`).
        beta_1, beta_2: floats, Adam's moment decays.
        Others: as in `finetune_optimizer`.

    Returns:
        A `keras.optimizers.AdamW`, or a `LayerwiseAdamW` with `layer_decay`.
    """
    schedule = (learning_rate, total_steps, warmup_steps, end_learning_rate, "linear")
    adam = dict(weight_decay=weight_decay, beta_1=beta_1, beta_2=beta_2, global_clipnorm=clipnorm)
    optimizer = _optimizer(
        keras.optimizers.AdamW, LayerwiseAdamW, schedule, accumulation_steps, layer_decay, model, **adam
    )
    optimizer.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY_NAMES))
    return optimizer


def decays_weight(optimizer, variable):
    """Whether `optimizer` applies weight decay to `variable`."""
    return keras_compat.uses_weight_decay(optimizer, variable)


def classification_loss(label_smoothing=0.0, from_logits=True, one_hot=False):
    """A cross-entropy `keras.losses.Loss` for integer labels, or `one_hot` ones (MixUp, CutMix)."""
    validation.rate("label_smoothing", label_smoothing)
    if one_hot:
        return keras.losses.CategoricalCrossentropy(from_logits=from_logits, label_smoothing=label_smoothing)
    if label_smoothing == 0.0:
        return keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits)
    return SparseSmoothedCrossentropy(label_smoothing=label_smoothing, from_logits=from_logits)


@serialization.register
class SparseSmoothedCrossentropy(keras.losses.Loss):
    """Label-smoothed cross-entropy for integer labels (Keras's sparse loss has no smoothing)."""

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
        return {**super().get_config(), "label_smoothing": self.label_smoothing, "from_logits": self.from_logits}


def atomic_save_model(model, path):
    """`model.save(path)` through a temporary file renamed into place."""
    with files.atomic_file(path) as staged:
        model.save(staged)


class FaultTolerantBackup(keras_compat.AtomicBackupWrites, keras.callbacks.BackupAndRestore):
    """`keras.callbacks.BackupAndRestore` whose files are replaced atomically; process 0 writes, all restore.

    Args:
        backup_dir: str, the folder of the backup (one all processes see).
        save_freq: `"epoch"` or an int number of batches.
        delete_checkpoint: bool, delete the backup when training finishes.
        run_settings: optional JSON-ready dict written beside the backup as `run_settings.json`.
    """

    SETTINGS_FILE = "run_settings.json"

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True, run_settings=None):
        super().__init__(backup_dir, save_freq=save_freq, delete_checkpoint=delete_checkpoint, double_checkpoint=False)
        self.run_settings = run_settings

    @property
    def async_safe(self):
        # Saving every N batches must happen on the training thread, or the weights change under the save.
        return self.save_freq == "epoch"

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        lora.redraw_folded_adapters(self.model)  # a LoRA run restored from the backup
        step = int(ops.convert_to_numpy(self.model.optimizer.iterations))
        multihost.check_same(f"the step restored from {self.backup_dir}", step)

    def on_train_end(self, logs=None):
        if multihost.is_primary():
            super().on_train_end(logs)

    def write_backup(self, weights_path, metadata_path, metadata):
        self.model  # noqa: B018 (on JAX, reading it gathers the training state, on every process)
        # The metadata is renamed into place after the weights: a kill between the two resumes from the epoch before.
        names = [os.path.basename(weights_path), os.path.basename(metadata_path)]
        if self.run_settings is not None:
            names.append(self.SETTINGS_FILE)

        def write_files():
            with files.atomic_files(os.path.dirname(os.path.abspath(weights_path)), names) as staged:
                self.model.save_weights(staged[names[0]])
                files.write_json(staged[names[1]], metadata)
                if self.run_settings is not None:
                    files.write_json(staged[self.SETTINGS_FILE], self.run_settings)

        multihost.run_on_primary(write_files, f"write the backup in {self.backup_dir}")


class StopAtIteration(keras.callbacks.Callback):
    """Ends `fit` once `optimizer.iterations` reaches `iterations`; put it after the backup callback.

    A resumed run repeats its epoch from the start (`BackupAndRestore` keeps no position in an epoch): this stops it
    after exactly the planned updates. It counts at batch begins: a batch end would make Keras read every step's logs.
    """

    def __init__(self, iterations):
        super().__init__()
        self.iterations = validation.positive_int("iterations", iterations)
        self.start_iteration = 0

    def on_train_begin(self, logs=None):
        optimizer = self.model.optimizer
        self.start_iteration = int(ops.convert_to_numpy(optimizer.iterations))
        # Whole updates from the restored count: batches left in the accumulators by a backup run without an update.
        self._batches_left = (self.iterations - self.start_iteration) * (optimizer.gradient_accumulation_steps or 1)

    def on_epoch_begin(self, epoch, logs=None):
        self._last_batch = -1

    def on_train_batch_begin(self, batch, logs=None):
        # The call's last batch index; Keras ends `fit` after the call that sets `stop_training`.
        last = batch + self.model.steps_per_execution - 1
        self._batches_left -= last - self._last_batch
        self._last_batch = last
        if self._batches_left <= 0:
            self.model.stop_training = True


class ThroughputMeter(keras.callbacks.Callback):
    """Measures training `batches_per_second` (`None` before any), without compilation or evaluation.

    Each epoch counts from its start to the end of its last train call; the run's first call compiles, so that epoch
    counts from the second call's start. Keras may run batch ends on its thread pool, late and in any order.
    """

    async_safe = True

    def __init__(self):
        super().__init__()
        self.batches = 0
        self.seconds = 0.0
        self._calls = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()
        self._first_batch = 0
        self._ends = []

    def on_train_batch_begin(self, batch, logs=None):
        # On the training thread, in order: the run's second call begins once the first, compiling, one is done.
        if self._calls < 2:
            self._calls += 1
            if self._calls == 2:
                self._start, self._first_batch = time.perf_counter(), batch

    def on_train_batch_end(self, batch, logs=None):
        # `batch` is the call's last index (`steps_per_execution`); `list.append` is safe across threads.
        self._ends.append((batch, time.perf_counter()))

    def on_epoch_end(self, epoch, logs=None):
        # Keras has run all of the epoch's batch ends by now.
        if self._calls == 2 and self._ends:
            self.batches += max(batch for batch, _ in self._ends) + 1 - self._first_batch
            self.seconds += max(end for _, end in self._ends) - self._start

    @property
    def batches_per_second(self):
        return self.batches / self.seconds if self.batches and self.seconds > 0 else None


class ReleaseGradients(keras.callbacks.Callback):
    """Frees each step's gradients when the next batch begins (torch; Keras clears them after the forward pass)."""

    def on_train_batch_begin(self, batch, logs=None):
        self._release()

    def on_train_end(self, logs=None):
        self._release()

    def _release(self):
        if keras.backend.backend() == "torch":
            self.model.zero_grad(set_to_none=True)


class AtomicModelCheckpoint(keras.callbacks.Callback):
    """Saves the whole model to the `.keras` `filepath` at every epoch's end, atomically."""

    def __init__(self, filepath):
        super().__init__()
        if not str(filepath).endswith(".keras"):
            raise ValueError(f"`filepath` must end in .keras. Received: filepath={filepath!r}")
        self.filepath = str(filepath)

    def on_epoch_end(self, epoch, logs=None):
        model = self.model  # read on every process (see `multihost.run_on_primary`)
        multihost.run_on_primary(lambda: atomic_save_model(model, self.filepath), f"write {self.filepath}")
