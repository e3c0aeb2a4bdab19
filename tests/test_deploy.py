"""Export: each artefact run by its own runtime (not Keras) agrees with the
Keras model within 1e-4, on each backend that can write the format; the
pairs that cannot work say so; a failed export leaves nothing behind."""

import json
import os

import keras
import numpy as np
import pytest

from keras_vit import deploy
from keras_vit.models import metadata
from keras_vit.models.applications import VisionTransformer
from keras_vit.models.preprocessing import preprocess_input
from tests import helpers

TINY = dict(patch_size=4, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, input_shape=(8, 8, 3))
NAMES = ["zero", "one", "two"]


def _classifier(**overrides):
    model = VisionTransformer(**{**TINY, **overrides}, classes=3, classifier_activation=None)
    helpers.randomize_weights(model)
    return metadata.with_class_names(model, NAMES)


def _images(batch=3):
    return np.random.default_rng(0).integers(0, 256, size=(batch, 8, 8, 3)).astype("uint8")


def _stored_class_names(path, format):
    if format == "onnx":
        import onnx

        return json.loads({p.key: p.value for p in onnx.load(path).metadata_props}["class_names"])
    if format == "openvino":
        import openvino as ov

        return ov.Core().read_model(path).get_rt_info(["model_info", "labels"]).astype(str).split()
    folder = os.path.join(path, "assets.extra") if format == "saved_model" else os.path.dirname(path)
    with open(os.path.join(folder, deploy.CLASS_NAMES_FILE)) as handle:
        return json.load(handle)


@pytest.mark.parametrize("format", deploy.FORMATS)
def test_artefact_matches_keras_in_its_own_runtime(format, tmp_path):
    ok, reason = deploy.supported(format)
    if not ok:
        with pytest.raises(ValueError, match="cannot be exported on the"):
            deploy.export(_classifier(), str(tmp_path / "vit"), format=format)
        assert os.listdir(tmp_path) == []
        pytest.skip(reason)
    model = _classifier()
    images = _images()
    expected = keras.ops.convert_to_numpy(model(preprocess_input(images.astype("float32"))))
    path = deploy.export(model, str(tmp_path / "vit"), format=format)
    run = deploy.load_artefact(path, format)
    # Batch size is dynamic: 3 here, the traced call used 1.
    np.testing.assert_allclose(run(images), expected, atol=1e-4, rtol=0)
    np.testing.assert_allclose(run(images[:1]), expected[:1], atol=1e-4, rtol=0)
    assert _stored_class_names(path, format) == NAMES
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".export-")]


def test_backbone_nested_in_a_saved_user_model_exports(tmp_path):
    format = next(f for f in ("saved_model", "openvino") if deploy.supported(f)[0])
    backbone = VisionTransformer(**TINY, include_top=False, pooling="gap")
    inputs = keras.Input((8, 8, 3))
    user_model = keras.Model(inputs, keras.layers.Dense(2, name="user_head")(backbone(inputs)))
    helpers.randomize_weights(user_model)
    user_model.save(tmp_path / "user.keras")
    images = _images(2).astype("float32")
    path = deploy.export(str(tmp_path / "user.keras"), str(tmp_path / "user"), format=format, input_dtype="float32")
    expected = keras.ops.convert_to_numpy(user_model(preprocess_input(images)))
    np.testing.assert_allclose(deploy.load_artefact(path, format)(images), expected, atol=1e-4, rtol=0)


def test_export_refuses_bad_arguments_and_existing_targets(tmp_path):
    model = _classifier()
    format = next(f for f in ("openvino", "saved_model") if deploy.supported(f)[0])
    with pytest.raises(ValueError, match="format"):
        deploy.export(model, str(tmp_path / "vit"), format="tflite")
    with pytest.raises(ValueError, match="input_dtype"):
        deploy.export(model, str(tmp_path / "vit"), format=format, input_dtype="int32")
    with pytest.raises(ValueError, match="class_names"):
        deploy.export(model, str(tmp_path / "vit"), format=format, class_names=["a"])
    with pytest.raises(ValueError, match="keras.Model or a `.keras` file"):
        deploy.export(str(tmp_path / "model.h5"), str(tmp_path / "vit"), format=format)
    taken = deploy.artefact_path(str(tmp_path / "taken"), format)
    os.makedirs(taken) if format == "saved_model" else open(taken, "w").close()
    with pytest.raises(FileExistsError):
        deploy.export(model, str(tmp_path / "taken"), format=format)
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(taken)]


def test_cli_exports_a_saved_model_file_and_names_unsupported_pairs(tmp_path, capsys):
    import keras_vit_cli

    _classifier().save(tmp_path / "model.keras")
    format = next(f for f in ("openvino", "saved_model") if deploy.supported(f)[0])
    assert keras_vit_cli.main(["export", str(tmp_path / "model.keras"), str(tmp_path / "vit"), "--format", format]) == 0
    assert "wrote" in capsys.readouterr().out
    assert os.path.exists(deploy.artefact_path(str(tmp_path / "vit"), format))
    unsupported = [f for f in deploy.FORMATS if not deploy.supported(f)[0]]
    if unsupported:
        argv = ["export", str(tmp_path / "model.keras"), str(tmp_path / "other"), "--format", unsupported[0]]
        assert keras_vit_cli.main(argv) == 2
        assert "cannot be exported on the" in capsys.readouterr().err
    argv = ["export", str(tmp_path / "model.keras"), str(tmp_path / "q"), "--format", "saved_model", "--int8"]
    assert keras_vit_cli.main(argv) == 2
    assert "--int8 is available for the formats" in capsys.readouterr().err


@pytest.mark.parametrize("format", deploy.INT8_FORMATS)
def test_int8_artefact_runs_int8_kernels_and_agrees_with_float32(format, tmp_path):
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the int8 formats are written on the TensorFlow backend; one backend is enough")
    # LiteRT leaves weights with fewer than 1024 elements float: hidden 32 makes the attention and MLP int8.
    model = _classifier(hidden_dim=32, mlp_dim=64)
    images = np.random.default_rng(1).integers(0, 256, size=(32, 8, 8, 3)).astype("uint8")
    # The float32 artefact equals the Keras model within 1e-4 (test above): compare with Keras, one export less.
    expected = keras.ops.convert_to_numpy(model(preprocess_input(images.astype("float32"))))
    path = deploy.export(model, str(tmp_path / "int8"), format=format, int8=True)
    actual = deploy.load_artefact(path, format)(images)
    assert actual.shape == expected.shape
    # int8 moves the logits by a few % of their range (~9 % here); a wrong scale or a lost bias by far more.
    assert np.max(np.abs(actual - expected)) <= 0.2 * np.max(np.abs(expected))
    assert np.mean(actual.argmax(-1) == expected.argmax(-1)) >= 0.9
    if format == "onnx":
        import onnx

        assert "DynamicQuantizeLinear" in {node.op_type for node in onnx.load(path).graph.node}
    else:
        from ai_edge_litert.interpreter import Interpreter

        assert any(detail["dtype"] == np.int8 for detail in Interpreter(model_path=path).get_tensor_details())
    assert _stored_class_names(path, format) == NAMES
    with pytest.raises(ValueError, match="int8=True is available for the formats"):
        deploy.export(model, str(tmp_path / "saved"), format="saved_model", int8=True)
    with pytest.raises(ValueError, match="`int8` must be True or False"):
        deploy.export(model, str(tmp_path / "onnx"), format="onnx", int8="yes")
    assert not (tmp_path / "saved").exists() and not (tmp_path / "onnx.onnx").exists()
