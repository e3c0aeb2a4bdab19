"""Layer-wise learning-rate decay: the multipliers, each variable's scaled update in `fit`, AdamW's decay, saving."""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import training
from keras_vit.training import layer_decay


def _model(num_layers=2, **options):
    options = dict(classes=3, classifier_activation=None) | options
    size = dict(patch_size=4, hidden_dim=8, num_heads=2, mlp_dim=16, input_shape=(8, 8, 3))
    return keras_vit.VisionTransformer(**size, num_layers=num_layers, **options)


def _data(n=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (n, 8, 8, 3)).astype("float32"), rng.integers(0, 3, n)


def _one_step(model, optimizer, images, labels):
    """The change of every variable after one `fit` step."""
    before = [keras.ops.convert_to_numpy(v).copy() for v in model.trainable_variables]
    model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(images, labels, batch_size=len(images), epochs=1, shuffle=False, verbose=0)
    return {v.path: keras.ops.convert_to_numpy(v) - b for v, b in zip(model.trainable_variables, before)}


def test_multipliers_decay_from_the_head_down_to_the_embeddings():
    multipliers = layer_decay.layer_decay_multipliers(_model(num_layers=3), 0.5)
    assert multipliers == {
        "patch_embedding": 0.0625,
        "class_token": 0.0625,
        "position_embedding": 0.0625,
        "encoder_block_0": 0.125,
        "encoder_block_1": 0.25,
        "encoder_block_2": 0.5,
    }
    optimizer = layer_decay.LayerwiseSGD(learning_rate_multipliers=multipliers)
    assert optimizer.multiplier_for("encoder_block_2/mlp/fc1/kernel") == 0.5
    assert optimizer.multiplier_for("vit/encoder_block_0/norm1/gamma") == 0.125  # nested backbone
    assert optimizer.multiplier_for("head/kernel") == optimizer.multiplier_for("encoder_norm/beta") == 1.0
    backbone = _model(num_layers=1, include_top=False, pooling="token")
    users_model = keras.Sequential([backbone, keras.layers.Dense(2, name="my_head")])
    assert layer_decay.layer_decay_multipliers(users_model, 0.5)["encoder_block_0"] == 0.5
    for decay in (0.0, 1.5):
        with pytest.raises(ValueError, match="decay"):
            layer_decay.layer_decay_multipliers(_model(), decay)
    with pytest.raises(ValueError, match="no keras_vit Vision Transformer"):
        layer_decay.layer_decay_multipliers(keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]), 0.7)
    with pytest.raises(ValueError, match="model="):
        training.finetune_optimizer(layer_decay=0.7)


def test_each_variable_moves_at_its_scaled_rate_in_fit():
    # Plain SGD: an update is -lr * grad, so with the same start and batch the
    # layer-wise update is exactly multiplier x the plain one.
    images, labels = _data()
    keras.utils.set_random_seed(0)
    reference = _model()
    reference.get_layer("head").kernel.assign(np.random.default_rng(1).normal(size=(8, 3)).astype("float32"))
    weights = reference.get_weights()
    plain = _one_step(reference, keras.optimizers.SGD(0.5), images, labels)

    model = _model()
    model.set_weights(weights)
    multipliers = layer_decay.layer_decay_multipliers(model, 0.5)
    scaled = _one_step(model, layer_decay.LayerwiseSGD(0.5, learning_rate_multipliers=multipliers), images, labels)
    seen = set()
    for path, delta in plain.items():
        factor = multipliers.get(path.split("/")[0], 1.0)
        np.testing.assert_allclose(scaled[path], factor * delta, rtol=1e-4, atol=1e-7, err_msg=path)
        if np.abs(delta).max() > 1e-6:
            seen.add(factor)
    assert seen == {0.125, 0.25, 0.5, 1.0}  # every level moved, at its own rate


def test_adamw_weight_decay_follows_the_scaled_rate():
    # Zero gradients: only decoupled weight decay moves a variable,
    # w -> w * (1 - lr * multiplier * wd), and excluded names (layer scales and RMSNorm scales too) stay put.
    model = _model(num_layers=1, layer_scale_init=0.1, normalization="rms")
    optimizer = training.pretrain_optimizer(
        learning_rate=0.1, total_steps=10, warmup_steps=0, weight_decay=0.5, clipnorm=None, layer_decay=0.5, model=model
    )
    assert isinstance(optimizer, layer_decay.LayerwiseAdamW) and (optimizer.beta_1, optimizer.beta_2) == (0.9, 0.999)
    variables = model.trainable_variables
    before = {v.path: keras.ops.convert_to_numpy(v).copy() for v in variables}
    rate = float(keras.ops.convert_to_numpy(optimizer.learning_rate))  # the rate of this step: the peak, 0.1
    optimizer.apply_gradients([(keras.ops.zeros(v.shape), v) for v in variables])
    decayed = {v.path for v in variables if training.decays_weight(optimizer, v)}
    assert decayed == {v.path for v in variables if v.path.endswith("kernel")}  # no biases, norms, tokens
    for v in variables:
        factor = optimizer.multiplier_for(v.path)
        expected = before[v.path] * (1 - rate * factor * 0.5) if v.path in decayed else before[v.path]
        np.testing.assert_allclose(keras.ops.convert_to_numpy(v), expected, rtol=1e-6, err_msg=v.path)
    assert optimizer.multiplier_for("patch_embedding/projection/kernel") == 0.25


def test_optimizer_saves_and_reloads_with_the_model(tmp_path):
    images, labels = _data(8)
    model = _model()
    optimizer = training.finetune_optimizer(
        learning_rate=0.1, total_steps=10, warmup_steps=2, accumulation_steps=2, layer_decay=0.75, model=model
    )
    assert isinstance(optimizer, layer_decay.LayerwiseSGD) and optimizer.gradient_accumulation_steps == 2
    model.compile(optimizer, training.classification_loss())
    model.fit(images, labels, batch_size=4, epochs=1, verbose=0)
    model.save(tmp_path / "model.keras")

    revived = keras.saving.load_model(tmp_path / "model.keras")
    assert type(revived.optimizer) is layer_decay.LayerwiseSGD
    assert revived.optimizer.learning_rate_multipliers == optimizer.learning_rate_multipliers
    assert revived.optimizer.momentum == 0.9
    # Training goes on from the restored state: same next step as the original.
    model.fit(images, labels, batch_size=4, epochs=1, shuffle=False, verbose=0)
    revived.fit(images, labels, batch_size=4, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), revived.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
