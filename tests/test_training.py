"""Recipes: schedules, optimizers, weight-decay exclusions, losses and the callbacks."""

import json
import os

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import training
from tests.helpers import BACKEND, KERAS_VERSION

TINY = dict(patch_size=4, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, input_shape=(8, 8, 3))


def _tiny_model(**options):
    return keras_vit.VisionTransformer(**TINY, classes=3, classifier_activation=None, **options)


def _compiled(optimizer="sgd", **options):
    model = _tiny_model()
    model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True), **options)
    return model


def _data(n=8, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (n, 8, 8, 3)).astype("float32"), rng.integers(0, classes, n)


def _values(schedule, steps):
    return [float(keras.ops.convert_to_numpy(schedule(step))) for step in steps]


def test_warmup_decay_values_serialization_and_checks():
    steps = (0, 5, 10, 60, 110, 200)
    linear = training.WarmupDecay(0.03, total_steps=110, warmup_steps=10, end=1e-5, decay="linear")
    middle = 1e-5 + (0.03 - 1e-5) * 0.5
    assert _values(linear, steps) == pytest.approx([0.0, 0.015, 0.03, middle, 1e-5, 1e-5], rel=1e-4)
    # The cosine has the values of Keras's CosineDecay with warmup.
    cosine = training.WarmupDecay(0.1, total_steps=20, warmup_steps=2, end=0.001)
    reference = keras.optimizers.schedules.CosineDecay(0.0, 18, alpha=0.01, warmup_target=0.1, warmup_steps=2)
    steps = (0, 1, 2, 3, 11, 19, 20, 30)
    assert _values(cosine, steps) == pytest.approx(_values(reference, steps), rel=1e-5)
    revived = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(cosine))
    assert isinstance(revived, training.WarmupDecay) and _values(revived, steps) == _values(cosine, steps)
    with pytest.raises(ValueError, match="warmup_steps"):
        training.WarmupDecay(0.1, total_steps=10, warmup_steps=10)
    with pytest.raises(ValueError, match="decay"):
        training.WarmupDecay(0.1, total_steps=10, warmup_steps=1, decay="step")


def test_finetune_optimizer_is_the_official_recipe():
    optimizer = training.finetune_optimizer(learning_rate=0.01, total_steps=100, warmup_steps=10, accumulation_steps=8)
    assert isinstance(optimizer, training.SyncFreeSGD) and isinstance(optimizer, keras.optimizers.SGD)
    assert optimizer.momentum == 0.9 and optimizer.global_clipnorm == 1.0
    assert not optimizer.weight_decay
    assert optimizer.gradient_accumulation_steps == 8
    # Keras schedules count batches, so the schedule is 8x longer in batches.
    schedule = optimizer._learning_rate
    assert isinstance(schedule, training.WarmupDecay) and schedule.decay == "cosine"
    assert (schedule.total_steps, schedule.warmup_steps) == (800, 80)
    assert (schedule.peak, schedule.end) == pytest.approx((0.01, 1e-5))
    assert training.finetune_optimizer(accumulation_steps=1).gradient_accumulation_steps is None
    with pytest.raises(ValueError, match="accumulation_steps"):
        training.finetune_optimizer(accumulation_steps=0)


def test_sparse_label_smoothing_equals_categorical():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 4)).astype("float32")
    labels = np.array([0, 3, 1, 2, 3])
    smoothed = training.classification_loss(label_smoothing=0.1)(labels, logits)
    reference = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)(
        np.eye(4, dtype="float32")[labels], logits
    )
    np.testing.assert_allclose(keras.ops.convert_to_numpy(smoothed), keras.ops.convert_to_numpy(reference), rtol=1e-6)
    assert isinstance(training.classification_loss(), keras.losses.SparseCategoricalCrossentropy)
    assert isinstance(training.classification_loss(0.1, one_hot=True), keras.losses.CategoricalCrossentropy)
    with pytest.raises(ValueError, match="label_smoothing"):
        training.classification_loss(1.0)


@pytest.mark.parametrize("momentum, nesterov, scheduled", [(0.0, False, True), (0.9, False, True), (0.9, True, False)])
def test_sync_free_sgd_updates_as_keras_sgd(momentum, nesterov, scheduled):
    images, labels = _data(8)
    weights = _tiny_model().get_weights()

    def train(optimizer_class):
        model = _tiny_model()
        model.set_weights(weights)
        # A schedule gives a new rate (a tensor) each step; a constant rate is a variable.
        rate = training.WarmupDecay(0.1, total_steps=6, warmup_steps=2, decay="cosine") if scheduled else 0.05
        optimizer = optimizer_class(rate, momentum=momentum, nesterov=nesterov, global_clipnorm=1.0)
        model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(images, labels, batch_size=2, epochs=1, shuffle=False, verbose=0)
        return model, optimizer

    (ours, optimizer), (keras_trained, keras_optimizer) = train(training.SyncFreeSGD), train(keras.optimizers.SGD)
    for a, b in zip(ours.get_weights(), keras_trained.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert any(not np.allclose(a, start) for a, start in zip(ours.get_weights(), weights))
    if momentum:
        for a, b in zip(optimizer.momentums, keras_optimizer.momentums, strict=True):
            np.testing.assert_allclose(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b), atol=1e-7)
    config = optimizer.get_config()
    assert dict(config, name="sgd") == keras_optimizer.get_config()
    revived = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(revived) is training.SyncFreeSGD and revived.get_config() == config


def _host_reads_in_a_training_step(optimizer):
    """How many times one `train_on_batch` of the tiny model reads a tensor's value back to the host (torch)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class CountHostReads(TorchDispatchMode):
        reads = 0

        def __torch_dispatch__(self, function, types, args=(), kwargs=None):
            if function is torch.ops.aten._local_scalar_dense.default:  # `.item()`, `float(tensor)`, `if tensor:`
                self.reads += 1
            return function(*args, **(kwargs or {}))

    images, labels = _data(4)
    model = _compiled(optimizer)
    model.train_on_batch(images, labels)  # builds the optimizer
    with CountHostReads() as counter:
        model.train_on_batch(images, labels)
    return counter.reads


@pytest.mark.skipif(BACKEND != "torch", reason="on jax and tensorflow the whole step is one compiled function")
def test_a_fine_tune_step_on_torch_never_waits_for_the_device():
    assert _host_reads_in_a_training_step(training.finetune_optimizer(total_steps=10, warmup_steps=2)) == 0
    # The counter does see Keras 3.15's own SGD read its rate back (twice per update with momentum); 3.16 reads
    # it no more, so `SyncFreeSGD` retires once 3.16 is the oldest Keras supported.
    keras_sgd = keras.optimizers.SGD(training.WarmupDecay(0.1, 10, 2, decay="cosine"), momentum=0.9)
    assert (_host_reads_in_a_training_step(keras_sgd) >= 1) == (KERAS_VERSION < (3, 16))


@pytest.mark.skipif(BACKEND != "torch", reason="torch.compile")
def test_torch_compile_traces_the_fine_tune_update_without_a_break():
    import torch

    from tests.helpers import import_tensorflow_if_installed

    import_tensorflow_if_installed()
    images, labels = (keras.ops.convert_to_tensor(array) for array in _data(4))
    # Every random layer on (a deterministic model runs a subset of its ops): each random draw through a Keras seed
    # generator once broke the graph, and past 8 breaks dynamo gave up (`recompile_limit` warnings, then eager steps).
    model = _tiny_model(dropout_rate=0.1, attention_dropout_rate=0.1, drop_path_rate=0.1, patch_dropout_rate=0.5)
    optimizer = training.finetune_optimizer(total_steps=10, warmup_steps=2)
    model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.train_on_batch(images, labels)
    try:
        explanation = torch._dynamo.explain(model.train_function)([(images, labels, None)])
    finally:
        torch._dynamo.reset()
    # Keras's torch train step calls `loss.backward()`, which dynamo does not trace: one break, two graphs.
    reasons = [str(reason.reason) for reason in explanation.break_reasons]
    assert explanation.graph_break_count == 1 and "backward" in reasons[0], reasons


@pytest.mark.parametrize("jit_compile", [False, True], ids=["eager", "compiled"])
def test_every_batch_trains_whatever_steps_per_execution_and_jit_compile(jit_compile):
    images, labels = _data(8)

    def fit(steps_per_execution, jit_compile):
        keras.utils.set_random_seed(0)
        optimizer = training.finetune_optimizer(0.1, total_steps=4, warmup_steps=1)
        model = _compiled(optimizer, jit_compile=jit_compile, steps_per_execution=steps_per_execution)
        history = model.fit(images, labels, batch_size=2, epochs=1, shuffle=False, verbose=0)
        return history.history["loss"], model.get_weights(), int(model.optimizer.iterations.numpy())

    if BACKEND == "torch" and KERAS_VERSION < (3, 16):
        pytest.skip("Keras 3.15's torch trainer takes steps_per_execution=1 only")
    loss, weights, steps = fit(1, False)
    assert steps == 4
    # Keras's own train step: four batches make four updates whether they run one by one or two per execution.
    for case in (fit(2, jit_compile), fit(4, jit_compile)):
        assert case[2] == steps
        np.testing.assert_allclose(case[0], loss, rtol=1e-4)
        for got, want in zip(case[1], weights, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_release_gradients_frees_them_and_changes_no_update():
    images, labels = _data(8)
    weights = _tiny_model(include_top=False).get_weights()

    def train(callbacks):
        keras.utils.set_random_seed(0)  # the same head
        inputs = keras.Input((8, 8, 3))  # the backbone nested in a user's model
        backbone = _tiny_model(include_top=False)
        backbone.set_weights(weights)
        model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.GlobalAveragePooling2D()(backbone(inputs))))
        optimizer = training.finetune_optimizer(0.1, total_steps=4, warmup_steps=1)  # momentum and clipping
        model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(images, labels, batch_size=4, epochs=2, shuffle=False, verbose=0, callbacks=callbacks)
        return model, backbone

    (released, backbone), (kept, _) = train([training.ReleaseGradients()]), train([])
    for a, b in zip(released.get_weights(), kept.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, start) for a, start in zip(backbone.get_weights(), weights))
    if BACKEND == "torch":
        # Keras's torch train step leaves them on the variables until after the next forward pass.
        assert all(variable.value.grad is not None for variable in kept.trainable_variables)
        assert all(variable.value.grad is None for variable in released.trainable_variables)


def test_atomic_save_model_keeps_the_old_file_when_saving_fails(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=".keras"):
        training.AtomicModelCheckpoint(str(tmp_path / "model.h5"))
    images, labels = _data(4)
    model = _compiled()
    path = str(tmp_path / "model.keras")
    model.fit(images, labels, epochs=1, verbose=0, callbacks=[training.AtomicModelCheckpoint(path)])
    revived = keras.saving.load_model(path)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(revived(images)), keras.ops.convert_to_numpy(model(images)), atol=1e-6
    )
    original = open(path, "rb").read()

    def failing_save(filepath, *args, **kwargs):
        with open(filepath, "wb") as file:
            file.write(b"half a model")
        raise OSError("disk full")

    monkeypatch.setattr(model, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        training.atomic_save_model(model, path)
    assert open(path, "rb").read() == original
    assert os.listdir(tmp_path) == ["model.keras"]  # no temporary left behind


def test_backup_resumes_epoch_weights_and_optimizer_state(tmp_path):
    images, labels = _data(8)
    backup_dir = str(tmp_path / "backup")
    model = _compiled(keras.optimizers.SGD(0.1, momentum=0.9))
    backup = training.FaultTolerantBackup(backup_dir, delete_checkpoint=False)
    model.fit(images, labels, batch_size=4, epochs=2, verbose=0, callbacks=[backup])
    assert sorted(os.listdir(backup_dir)) == ["latest.weights.h5", "training_metadata.json"]
    assert json.load(open(os.path.join(backup_dir, "training_metadata.json")))["epoch"] == 2

    resumed = _compiled(keras.optimizers.SGD(0.1, momentum=0.9))
    history = resumed.fit(
        images, labels, batch_size=4, epochs=3, verbose=0, callbacks=[training.FaultTolerantBackup(backup_dir)]
    )
    assert history.epoch == [2]  # epochs 0 and 1 came from the backup
    assert int(keras.ops.convert_to_numpy(resumed.optimizer.iterations)) == 6
    assert not os.path.exists(backup_dir)  # deleted once training finished


def test_throughput_meter_sums_each_epoch_from_its_calls_ends_in_any_order(monkeypatch):
    import random

    from keras_vit.training import recipes

    def at(seconds, callback, *args):
        monkeypatch.setattr(recipes.time, "perf_counter", lambda: seconds)
        callback(*args)

    meter = training.ThroughputMeter()
    # Calls of 2 batches. Epoch 0 starts at 0, its calls at 0 (it compiles until 3), 3, 4, 5, and they end at 3, 4,
    # 5, 6; epoch 1 starts at 10 (after evaluation), its calls end at 11, 12, 13, 14. Keras's thread pool runs batch
    # ends late and in any order: the last call's end may come before an earlier one's.
    epochs = {0: (0.0, {1: 3.0, 3: 4.0, 5: 5.0, 7: 6.0}), 1: (10.0, {1: 11.0, 3: 12.0, 5: 13.0, 7: 14.0})}
    for epoch, (start, ends) in epochs.items():
        at(start, meter.on_epoch_begin, epoch)
        for last, end in ends.items():
            at(end - 1 if last > 1 else start, meter.on_train_batch_begin, last - 1)
        order = list(ends.items())
        random.Random(epoch).shuffle(order)
        for last, end in order:
            at(end, meter.on_train_batch_end, last)
        at(20.0, meter.on_epoch_end, epoch)  # evaluation time is not counted
        if epoch == 0:
            assert (meter.batches, meter.seconds) == (6, 3.0)  # from the second call's start at 3: 3 calls, 3 s
    assert (meter.batches, meter.seconds) == (6 + 8, 3.0 + 4.0)  # epoch 1 from its start at 10 to 14
    assert meter.batches_per_second == pytest.approx(2.0)
    # An epoch of one call: the compiling call is all of it, and the next epoch counts from its own start.
    meter = training.ThroughputMeter()
    for epoch, start, end in ((0, 0.0, 3.0), (1, 10.0, 11.0)):
        at(start, meter.on_epoch_begin, epoch)
        at(start, meter.on_train_batch_begin, 0)
        at(end, meter.on_train_batch_end, 1)
        at(end, meter.on_epoch_end, epoch)
        assert epoch or meter.batches_per_second is None
    assert (meter.batches, meter.seconds) == (2, 1.0)


def test_finetune_callbacks_leave_batch_ends_to_keras_thread_pool(tmp_path):
    # Keras reads a step's logs on the training thread (a device synchronization per step on a GPU) as soon as one
    # callback has a batch end that is not `async_safe`; then every batch end runs there.
    def blocking(callback):
        base = keras.callbacks.Callback
        plain = type(callback).on_train_batch_end is base.on_train_batch_end
        plain = plain and type(callback).on_batch_end is base.on_batch_end
        return not plain and not getattr(callback, "async_safe", False)

    from keras_vit.training import finetune

    config = finetune.make_config(out=str(tmp_path / "run"), steps=6)
    assert not [callback for callback in finetune.make_callbacks(config) if blocking(callback)]
    assert training.FaultTolerantBackup(str(tmp_path / "b")).async_safe
    assert not training.FaultTolerantBackup(str(tmp_path / "b"), save_freq=4).async_safe  # saves from a batch end
    assert training.StopAtIteration.on_train_batch_end is keras.callbacks.Callback.on_train_batch_end

    import threading

    class Threads(keras.callbacks.Callback):
        async_safe = True
        seen = set()

        def on_train_batch_end(self, batch, logs=None):
            self.seen.add(threading.current_thread() is threading.main_thread())

    images, labels = _data(16)
    model = _compiled(keras.optimizers.SGD(0.1))
    threads, meter = Threads(), training.ThroughputMeter()
    stop = training.StopAtIteration(6)
    callbacks = [training.FaultTolerantBackup(str(tmp_path / "backup")), stop, meter, training.ReleaseGradients()]
    model.fit(images, labels, batch_size=2, epochs=2, callbacks=[*callbacks, threads], verbose=0)
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 6
    assert meter.batches == 5 and meter.seconds > 0  # the 6 batches of one call each, the compiling one aside
    # TensorFlow's backend is not thread-safe: Keras runs every callback on the training thread there.
    assert threads.seen == ({True} if BACKEND == "tensorflow" else {False})


def test_stop_at_iteration_ends_a_resumed_run_on_the_planned_count():
    images, labels = _data(16)
    model = _compiled(keras.optimizers.SGD(0.1))
    model.fit(images, labels, batch_size=4, epochs=1, verbose=0)  # 4 batches "before the kill"
    stop = training.StopAtIteration(6)
    history = model.fit(images, labels, batch_size=4, epochs=2, callbacks=[stop], verbose=0)
    assert stop.start_iteration == 4
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 6
    assert len(history.history["loss"]) == 1  # stopped inside the first epoch, which still ended

    # Counted in updates: 2 batches each, 3 batches per call (torch runs one per call).
    optimizer = keras.optimizers.SGD(0.1, gradient_accumulation_steps=2)
    model = _compiled(optimizer, steps_per_execution=1 if BACKEND == "torch" else 3)
    stop = training.StopAtIteration(3)
    model.fit(images, labels, batch_size=1, epochs=2, callbacks=[stop], verbose=0)
    assert int(keras.ops.convert_to_numpy(optimizer.iterations)) == 3  # after 6 of the 32 batches
    with pytest.raises(ValueError, match="iterations"):
        training.StopAtIteration(0)


def _saved_for_backward(step, weights):
    """`{"shape dtype": count}` of the storages autograd keeps for the backward pass of `step()` (torch): each
    storage once, by the first view saved, the weights and scalars aside."""
    import collections

    import torch

    weight_storages = {weight.untyped_storage().data_ptr() for weight in weights}
    saved = {}

    def pack(tensor):
        address = tensor.untyped_storage().data_ptr()
        if address not in weight_storages and tensor.dim():
            saved.setdefault(address, f"{tuple(tensor.shape)} {tensor.dtype}")
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        step()
    return collections.Counter(saved.values())


@pytest.mark.skipif(BACKEND != "torch", reason="torch's autograd: the torch run")
def test_a_torch_training_step_keeps_the_activations_timm_keeps():
    # Activation memory at parity with timm: the same storages saved for the backward pass, and besides them only
    # the patch kernel in torch's layout (Keras's channels-last convolution): no copies around the attention.
    import torch

    from tests.timm_reference import import_timm

    size = dict(patch_size=8, hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64)
    images = np.random.default_rng(0).uniform(-1, 1, (2, 16, 16, 3)).astype("float32")
    labels = np.array([1, 3])
    model = keras_vit.VisionTransformer(**size, input_shape=(16, 16, 3), classes=10, classifier_activation=None)
    model.compile(keras.optimizers.SGD(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.train_on_batch(images, labels)  # builds the optimizer and the train function
    kept = _saved_for_backward(lambda: model.train_on_batch(images, labels), [w.value for w in model.weights])

    timm = import_timm().models.vision_transformer.VisionTransformer(
        img_size=16, patch_size=8, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2, num_classes=10
    )
    timm_images = torch.from_numpy(images.transpose(0, 3, 1, 2).copy())

    def timm_step():
        torch.nn.functional.cross_entropy(timm(timm_images), torch.from_numpy(labels)).backward()

    kept_by_timm = _saved_for_backward(timm_step, [*timm.parameters(), *timm.buffers()])
    assert kept.pop("(32, 3, 8, 8) torch.float32") == 1
    assert kept == kept_by_timm
