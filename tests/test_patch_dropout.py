"""PatchDropout: training keeps the class token and a random ordered subset of the patch tokens; inference does not."""

import json

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import layers
from tests.helpers import BACKEND, random_inputs, randomize_weights, run_model_test, to_numpy

TINY = dict(patch_size=4, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32)


def _tokens(batch, length, dim=3):
    """Distinct values: token t of image b holds b * length + t in every channel."""
    ids = np.arange(batch * length, dtype="float32").reshape(batch, length, 1)
    return np.repeat(ids, dim, axis=-1)


def test_patch_dropout_model_contract(tmp_path):
    run_model_test(
        lambda: keras_vit.VisionTransformer(**TINY, input_shape=(16, 12, 3), classes=3, patch_dropout_rate=0.5),
        input_shape=(2, 16, 12, 3),
        expected_output_shape=(2, 3),
        workdir=tmp_path,
        fresh_process=False,
        jit=BACKEND != "torch",
    )


@pytest.mark.parametrize(("rate", "num_patches"), [(0.5, 16), (0.3, 10), (0.75, 7), (0.9, 5), (0.5, 1)])
def test_training_keeps_the_class_token_and_an_ordered_subset(rate, num_patches):
    batch = 4
    tokens = _tokens(batch, 1 + num_patches)
    kept = to_numpy(layers.PatchDropout(rate, seed=3)(tokens, training=True))
    expected_count = max(1, int(np.floor((1 - rate) * num_patches + 1e-6)))
    assert kept.shape == (batch, 1 + expected_count, 3)
    np.testing.assert_array_equal(kept[:, 0], tokens[:, 0])  # the class token, first and unchanged
    for image in range(batch):
        ids = kept[image, 1:, 0] - image * (1 + num_patches)
        assert np.all(np.diff(ids) > 0)  # distinct, in their original order
        assert np.all((ids >= 1) & (ids <= num_patches))  # only this image's patch tokens
        np.testing.assert_array_equal(kept[image, 1:], tokens[image, ids.astype(int)])


@pytest.mark.parametrize("seed", [None, 5], ids=["unseeded", "seeded"])  # unseeded torch draws by its own dropout
def test_every_patch_is_kept_equally_often(seed):
    # 4000 images of 8 patches at rate 0.75 (2 kept): each patch 1 time in 4 (a std of 0.007), each pair alike.
    batch, num_patches = 4000, 8
    tokens = _tokens(batch, 1 + num_patches, dim=1)
    kept = to_numpy(layers.PatchDropout(0.75, seed=seed)(tokens, training=True))[:, 1:, 0]
    ids = (kept - np.arange(batch)[:, None] * (1 + num_patches)).astype(int) - 1
    frequency = np.bincount(ids.ravel(), minlength=num_patches) / batch
    np.testing.assert_allclose(frequency, 0.25, atol=0.03)
    pairs = np.bincount(ids[:, 0] * num_patches + ids[:, 1], minlength=num_patches**2) / batch
    chosen = pairs.reshape(num_patches, num_patches)[np.triu_indices(num_patches, 1)]
    np.testing.assert_allclose(chosen, 1 / 28, atol=0.015)


def test_draws_differ_per_image_and_call_and_repeat_with_the_seed():
    tokens = _tokens(8, 1 + 16)
    first, second = (layers.PatchDropout(0.5, seed=11) for _ in range(2))
    a, b = to_numpy(first(tokens, training=True)), to_numpy(second(tokens, training=True))
    np.testing.assert_array_equal(a, b)  # same seed, same draw
    offsets = np.arange(8)[:, None] * 17
    subsets = {tuple(row) for row in (a[:, 1:, 0] - offsets).astype(int)}
    assert len(subsets) > 1
    assert not np.array_equal(to_numpy(first(tokens, training=True)), a)


def test_off_adds_no_layer_and_inference_never_drops():
    plain, off, dropping = (
        keras_vit.VisionTransformer(**TINY, input_shape=(16, 12, 3), classes=3, **options)
        for options in ({}, dict(patch_dropout_rate=0.0), dict(patch_dropout_rate=0.5))
    )
    assert json.dumps(off.get_config(), sort_keys=True) == json.dumps(plain.get_config(), sort_keys=True)
    assert not any(isinstance(layer, layers.PatchDropout) for layer in off.layers)
    randomize_weights(plain)
    off.set_weights(plain.get_weights())
    dropping.set_weights(plain.get_weights())
    inputs = random_inputs((2, 16, 12, 3))
    expected = to_numpy(plain(inputs, training=True))
    np.testing.assert_array_equal(to_numpy(off(inputs, training=True)), expected)
    assert not np.array_equal(to_numpy(dropping(inputs, training=True)), expected)
    np.testing.assert_array_equal(to_numpy(dropping(inputs)), to_numpy(plain(inputs)))


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_any_image_size_in_training(policy):
    keras.config.set_dtype_policy(policy)
    model = keras_vit.VisionTransformer(
        **TINY, include_top=False, return_sequence=True, input_shape=(None, None, 3), patch_dropout_rate=0.5
    )
    randomize_weights(model)
    # 16x24 px -> 4x6 = 24 patches, 12 kept; 20x18 px -> 5x5 = 25 patches (padded), 12 kept; 8x8 -> 4, 2 kept.
    for (height, width), kept in (((16, 24), 12), ((20, 18), 12), ((8, 8), 2)):
        tokens = model(random_inputs((2, height, width, 3)), training=True)
        assert tuple(keras.ops.shape(tokens)) == (2, 1 + kept, TINY["hidden_dim"])
        assert keras.backend.standardize_dtype(tokens.dtype) == ("float32" if policy == "float32" else "bfloat16")


@pytest.mark.skipif(BACKEND != "tensorflow", reason="a tf.function with an unknown token count")
def test_a_dynamic_token_count_in_a_tensorflow_graph():
    import tensorflow as tf

    layer = layers.PatchDropout(0.5, seed=1)
    call = tf.function(lambda tokens: layer(tokens, training=True), input_signature=[tf.TensorSpec((None, None, 3))])
    assert tuple(call(_tokens(2, 1 + 24)).shape) == (2, 13, 3)
    assert tuple(call(_tokens(2, 1 + 9)).shape) == (2, 5, 3)
