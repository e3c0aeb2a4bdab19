"""LoRA: adapters on the chosen projections, the rest but the head frozen, kept by saving, merged back."""

import json
import os

import keras
import numpy as np
import pytest

import keras_vit
from tests.helpers import random_inputs, randomize_weights, to_numpy, trainable_gradients

TINY = dict(patch_size=4, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32, input_shape=(8, 12, 3), classes=3)
TINY_SMALL_CONFIG = dict(patch_size=4, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32)
# DINOv3's position scheme: registers, RoPE, no position table.
DINOV3 = dict(
    num_register_tokens=4, position_embedding=False, rope=dict(rope_type="dinov3", temperature=100.0, rotate_half=True)
)


def _trainable_paths(model):
    return sorted(variable.path for variable in model.trainable_weights)


@pytest.mark.parametrize(
    "targets, layers, options",
    [
        (("attention",), {"qkv", "output"}, {}),
        (("attention", "mlp"), {"qkv", "output", "fc1", "fc2"}, {}),
        (("attention",), {"qkv", "output"}, {"distillation_token": True}),  # DeiT: both heads train
        (("attention",), {"qkv", "output"}, DINOV3),
        # Mixed RoPE's learned frequencies are frozen with the rest.
        (("attention", "mlp"), {"qkv", "output", "fc1", "fc2"}, {"rope": {"rope_type": "mixed"}}),
    ],
    ids=["attention", "attention_mlp", "deit", "dinov3", "mixed_rope"],
)
def test_only_the_adapters_and_the_head_train(targets, layers, options):
    model = keras_vit.VisionTransformer(**TINY, **options)
    randomize_weights(model)
    images = random_inputs((2, 8, 12, 3))
    before = to_numpy(model(images))
    model.enable_lora(4, targets=targets)

    # The adapters start at zero: the model computes what it did.
    np.testing.assert_allclose(to_numpy(model(images)), before, atol=1e-6)
    adapters = [path for path in _trainable_paths(model) if "lora_kernel" in path]
    assert len(adapters) == 2 * len(layers) * TINY["num_layers"]
    assert {path.split("/")[-2] for path in adapters} == layers
    heads = ("head", "head_dist") if options.get("distillation_token") else ("head",)
    expected = {f"{head}/{name}" for head in heads for name in ("kernel", "bias")}
    assert {path for path in _trainable_paths(model) if "lora_kernel" not in path} == expected
    # Gradients reach exactly the trainable weights; fit leaves the frozen ones as they were.
    assert len(trainable_gradients(model, images)) == len(model.trainable_weights)
    frozen = {v.path: to_numpy(v) for v in model.weights if not v.trainable}
    head = to_numpy(model.get_layer("head").kernel)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    model.fit(random_inputs((4, 8, 12, 3)), np.array([0, 1, 2, 0]), epochs=1, verbose=0)
    for variable in model.weights:
        if variable.path in frozen:
            np.testing.assert_array_equal(to_numpy(variable), frozen[variable.path])
    assert not np.array_equal(to_numpy(model.get_layer("head").kernel), head)


def test_lora_model_saves_reloads_and_merges(tmp_path):
    model = keras_vit.VisionTransformer(**TINY)
    randomize_weights(model)
    model.enable_lora(4, targets=("attention", "mlp"))
    for variable in model.trainable_weights:  # random adapters, as after some training
        if "lora_kernel_b" in variable.path:
            variable.assign(np.random.default_rng(1).normal(scale=0.1, size=variable.shape))
    images = random_inputs((2, 8, 12, 3))
    path = str(tmp_path / "lora.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path, safe_mode=True)
    assert reloaded.get_config()["lora_rank"] == 4
    assert reloaded.get_config()["lora_targets"] == ("attention", "mlp")
    np.testing.assert_allclose(to_numpy(reloaded(images)), to_numpy(model(images)), rtol=1e-5, atol=1e-6)
    # Keras saves the adapters folded into the kernels: training goes on from fresh adapters, same weights frozen.
    assert _trainable_paths(reloaded) == _trainable_paths(model)

    merged = model.merge_lora()
    assert merged.get_config()["lora_rank"] is None
    assert not any("lora" in variable.path for variable in merged.weights)
    assert merged.count_params() == keras_vit.VisionTransformer(**TINY).count_params()
    np.testing.assert_allclose(to_numpy(merged(images)), to_numpy(model(images)), rtol=1e-5, atol=1e-6)


def test_lora_on_a_backbone_nested_in_a_users_model():
    backbone = keras_vit.VisionTransformer(**dict(TINY, classes=None), include_top=False, pooling="token")
    inputs = keras.Input((8, 12, 3))
    outputs = keras.layers.Dense(5, name="my_head")(backbone(inputs))
    model = keras.Model(inputs, outputs)
    backbone.enable_lora(2)

    trainable = _trainable_paths(model)
    assert {path for path in trainable if "lora_kernel" not in path} == {"my_head/kernel", "my_head/bias"}
    assert len(trainable_gradients(model, random_inputs((2, 8, 12, 3)))) == len(trainable)


@pytest.mark.parametrize("rank, targets", [(0, ("attention",)), (4, ("attention", "norm")), (4, ())])
def test_bad_lora_arguments_are_refused(rank, targets):
    model = keras_vit.VisionTransformer(**TINY)
    with pytest.raises(ValueError, match="lora"):
        model.enable_lora(rank, targets=targets)


# The job on every backend; with RoPE (its metadata through the saved file) on torch, where it runs fastest.
ON_TORCH = pytest.mark.skipif(keras.backend.backend() != "torch", reason="the RoPE model's job: the torch run")


@pytest.mark.parametrize("options", [{}, pytest.param(DINOV3, marks=ON_TORCH)], ids=["plain", "dinov3"])
def test_finetune_with_lora_trains_the_adapters_and_prints_the_count(monkeypatch, tmp_path, capsys, options):
    import keras_vit_cli as cli
    from keras_vit.training import finetune

    monkeypatch.setattr(finetune, "SMALL_CONFIG", {**TINY_SMALL_CONFIG, **options})
    out = str(tmp_path / "run")
    argv = ["finetune", "--lora", "2", "--steps", "2", "--epochs", "1", "--batch-size", "16", "--verbose", "0"]
    assert cli.main([*argv, "--out", out]) == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "--weights" in captured.err and captured.err.count("\n") == 1  # the one note: a random backbone
    metrics = json.load(open(os.path.join(out, "metrics.json")))
    assert metrics["lora"] == 2 and 0 < metrics["trainable_parameters"] < metrics["parameters"]
    assert f"LoRA rank 2: trained {metrics['trainable_parameters']:,} of {metrics['parameters']:,}" in printed
    model = keras.saving.load_model(os.path.join(out, "model.keras"), safe_mode=True)
    assert keras_vit.models.find_vit(model).lora_rank == 2
    assert keras_vit.models.find_vit(model).rope == options.get("rope")


def test_a_lora_run_restored_from_its_backup_computes_as_before_and_trains_its_adapters(tmp_path):
    from keras_vit import training
    from keras_vit.utils import keras_compat

    images, labels = random_inputs((4, 8, 12, 3)), np.array([0, 1, 2, 0])
    backup_dir = str(tmp_path / "backup")

    def lora_model():
        model = keras_vit.VisionTransformer(**TINY)
        randomize_weights(model)  # a non-zero head: the adapters receive gradients from the first step
        model.enable_lora(2)
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
        return model

    model = lora_model()
    backup = training.FaultTolerantBackup(backup_dir, delete_checkpoint=False)
    model.fit(images, labels, batch_size=2, epochs=1, verbose=0, callbacks=[backup])
    expected = to_numpy(model(images))
    resumed = lora_model()
    restored = {}
    probe = keras.callbacks.LambdaCallback(
        on_train_begin=lambda logs: restored.update(outputs=to_numpy(resumed(images)))
    )
    resumed.fit(
        images, labels, batch_size=2, epochs=2, verbose=0, callbacks=[training.FaultTolerantBackup(backup_dir), probe]
    )
    np.testing.assert_allclose(restored["outputs"], expected, atol=1e-5)
    # Keras restores both adapters at zero, where neither has a gradient: the resumed epoch must still move them.
    adapted = [layer for layer in keras_compat.sublayers(resumed) if getattr(layer, "lora_enabled", False)]
    assert adapted and all(np.any(to_numpy(layer.lora_kernel_b)) for layer in adapted)
