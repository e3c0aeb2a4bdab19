"""Class names saved in a model, and the commands that read saved models on a ViT nested in a user's model."""

import os

import keras
import numpy as np
import pytest

import keras_vit
import keras_vit_cli as cli
from keras_vit.models import metadata
from tests.helpers import BACKEND, assert_config_round_trip, run_model_test

TINY = dict(patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, input_shape=(16, 16, 3))


def test_class_names_layer_contract(tmp_path):
    # No weights of its own: the model checks on the head of a tiny ViT.
    layer = metadata.ClassNames(["cat", "dog", "emu"])
    assert_config_round_trip(layer)
    run_model_test(
        lambda: metadata.with_class_names(keras_vit.VisionTransformer(**TINY, classes=3), ["cat", "dog", "emu"]),
        input_shape=(2, 16, 16, 3),
        expected_output_shape=(2, 3),
        workdir=tmp_path,
        fresh_process=False,
        jit=False,  # the model's jit is test_models'
    )


def test_class_names_layer_rejects_bad_names_and_a_mismatched_output():
    for names in ("cat", [], ["a", "a"], [1, 2]):
        with pytest.raises(ValueError, match="class_names"):
            metadata.ClassNames(names)
    with pytest.raises(ValueError, match="2 names"):
        metadata.ClassNames(["a", "b"])(keras.Input((3,)))


def _nested_classifier():
    """The usual transfer-learning shape: a ViT backbone inside the user's model, with class names."""
    backbone = keras_vit.VisionTransformer(**TINY, include_top=False, pooling="token", name="vit_backbone")
    inputs = keras.Input((16, 16, 3))
    logits = keras.layers.Dense(2, name="user_head")(backbone(inputs))
    return metadata.with_class_names(keras.Model(inputs, logits, name="user_model"), ["ant", "bee"])


def test_nested_model_round_trips_class_names_and_finds_its_vit(tmp_path):
    model = _nested_classifier()
    # A training compile from another backend may be one this one refuses (torch: steps_per_execution > 1).
    model.compile("sgd", "mse")
    path = str(tmp_path / "nested.keras")
    model.save(path)
    loaded = metadata.load_classifier(path)
    assert keras_vit.class_names(loaded) == ("ant", "bee") and not loaded.compiled
    images = np.random.default_rng(0).uniform(-1, 1, (2, 16, 16, 3)).astype("float32")
    rows = metadata.top_classes(loaded, keras.ops.convert_to_numpy(loaded(images)), top=2)
    assert [sorted(name for name, _ in row) for row in rows] == [["ant", "bee"]] * 2
    assert all(abs(sum(p for _, p in row) - 1.0) < 1e-6 for row in rows)  # logits went through a softmax
    assert keras_vit.class_names(keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])) is None


@pytest.mark.skipif(BACKEND != "tensorflow", reason="the commands are tested on one backend")
def test_commands_accept_a_saved_nested_vit(tmp_path, capsys):
    from PIL import Image

    model_path = str(tmp_path / "model.keras")
    _nested_classifier().save(model_path)
    image = str(tmp_path / "photo.png")
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(image)

    assert cli.main(["predict", image, "--model", model_path, "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == image and sorted(line.split()[1] for line in lines[1:]) == ["ant", "bee"]

    assert cli.main(["inspect", image, "--model", model_path, "--out", str(tmp_path / "figures")]) == 0
    out = capsys.readouterr().out
    assert "class names (2): ant, bee" in out
    assert len(os.listdir(tmp_path / "figures")) == 5

    assert cli.main(["convert", model_path, str(tmp_path / "vit.safetensors")]) == 0
    assert "timm layout" in capsys.readouterr().out
    assert os.path.getsize(tmp_path / "vit.safetensors") > 0

    assert cli.main(["predict", image, "--model", str(tmp_path / "missing.keras")]) == 1
    assert "No saved model" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["random-bytes", "truncated"])
def test_a_damaged_keras_file_is_called_damaged_not_missing(tmp_path, damage):
    path = tmp_path / "model.keras"
    if damage == "random-bytes":
        path.write_bytes(np.random.default_rng(0).bytes(4096))
    else:
        _nested_classifier().save(str(path))
        path.write_bytes(path.read_bytes()[:2048])
    with pytest.raises(ValueError, match="damaged") as caught:
        metadata.load_classifier(str(path))
    assert "not found" not in str(caught.value).lower()
