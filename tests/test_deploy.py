"""Export: each artefact, run by its own runtime, agrees with Keras within 1e-4 and has one input `images` and one
output `outputs`; unsupported pairs say so; an export never replaces a file, and a killed one leaves no artefact.
Exports are slow: the tests that only read an artefact share one export per format (`exported`)."""

import collections
import logging
import os
import re
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_vit import deploy
from keras_vit.deploy import writers
from keras_vit.models import metadata
from keras_vit.models.applications import VisionTransformer
from keras_vit.models.preprocessing import preprocess_input
from keras_vit.utils import files
from tests import helpers

TINY = dict(patch_size=4, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, input_shape=(8, 8, 3))
NAMES = ["zero", "one", "two"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Another model's class names, already in the folder the shared artefacts are exported into.
FOREIGN_NAMES = '["cat", "dog"]'


def _classifier(**overrides):
    model = VisionTransformer(**{**TINY, **overrides}, classes=3, classifier_activation=None)
    helpers.randomize_weights(model)
    return metadata.with_class_names(model, NAMES)


def _images(batch=3):
    return np.random.default_rng(0).integers(0, 256, size=(batch, 8, 8, 3)).astype("uint8")


def _cheapest_format(order=("saved_model", "openvino")):
    """A format this backend writes, the first of `order`."""
    return next(f for f in order if deploy.supported(f)[0])


def _runtime_names(path, format):
    """(input names, output names) as the artefact's own runtime lists them (OpenVINO: one set per tensor)."""
    if format == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        return [i.name for i in session.get_inputs()], [o.name for o in session.get_outputs()]
    if format == "openvino":
        import openvino as ov

        compiled = ov.Core().compile_model(path, "CPU")
        return [sorted(i.get_names()) for i in compiled.inputs], [sorted(o.get_names()) for o in compiled.outputs]
    if format == "litert":
        from ai_edge_litert.interpreter import Interpreter

        interpreter = Interpreter(model_path=path)
        (signature,) = interpreter.get_signature_list().values()
        assert len(interpreter.get_output_details()) == len(signature["outputs"])
        return signature["inputs"], signature["outputs"]
    import tensorflow as tf

    signatures = tf.saved_model.load(path).signatures
    assert set(signatures) == {"serve", "serving_default"}
    names = {(tuple(f.structured_input_signature[1]), tuple(f.structured_outputs)) for f in signatures.values()}
    assert len(names) == 1, names
    inputs, outputs = names.pop()
    return list(inputs), list(outputs)


def _expected_names(format, inputs=(deploy.INPUT_NAME,)):
    names = list(inputs), [deploy.OUTPUT_NAME]
    return tuple([[name] for name in group] for group in names) if format == "openvino" else names


@pytest.fixture(scope="module")
def classifier():
    return _classifier()


@pytest.fixture(scope="module")
def exported(classifier, tmp_path_factory):
    """`exported(format)`: `classifier` exported once as `served/vit`, beside another model's `class_names.json`."""
    folder = tmp_path_factory.mktemp("served")
    (folder / deploy.CLASS_NAMES_FILE).write_text(FOREIGN_NAMES)
    paths = {}

    def export(format):
        if format not in paths:
            paths[format] = deploy.export(classifier, str(folder / "vit"), format=format)
        return paths[format]

    return export


@pytest.mark.parametrize("format", deploy.FORMATS)
def test_artefact_matches_keras_in_its_own_runtime(format, classifier, exported, tmp_path, caplog):
    ok, reason = deploy.supported(format)
    if not ok:
        with pytest.raises(ValueError, match="cannot be exported on the"):
            deploy.export(classifier, str(tmp_path / "vit"), format=format)
        assert os.listdir(tmp_path) == []
        pytest.skip(reason)
    images = _images()
    expected = keras.ops.convert_to_numpy(classifier(preprocess_input(images.astype("float32"))))
    path = exported(format)
    with caplog.at_level(logging.WARNING):  # from JAX, TensorFlow warned on each load of a SavedModel
        run = deploy.load_artefact(path, format)
    assert [record for record in caplog.records if record.levelno >= logging.WARNING] == []
    # The batch size is dynamic: the traced call used 1.
    np.testing.assert_allclose(run(images), expected, atol=1e-4, rtol=0)
    np.testing.assert_allclose(run(images[:1]), expected[:1], atol=1e-4, rtol=0)
    assert deploy.artefact_class_names(path, format) == NAMES
    folder = os.path.dirname(path)
    assert not [name for name in os.listdir(folder) if name.startswith(files.TEMP_PREFIX)]
    # One input and one output (Keras's OpenVINO export had one per unused shape slice).
    assert _runtime_names(path, format) == _expected_names(format)
    # LiteRT's class names sit beside the artefact under its own name; another model's file stays as it was.
    with open(os.path.join(folder, deploy.CLASS_NAMES_FILE)) as handle:
        assert handle.read() == FOREIGN_NAMES
    if format != "openvino":
        return
    import openvino as ov

    graph = ov.Core().read_model(path)
    # The image size fixed, the batch dynamic (torch's trace left all four dynamic).
    (inputs,) = graph.inputs
    shape = [dimension.get_length() if dimension.is_static else None for dimension in inputs.get_partial_shape()]
    assert shape == [None, 8, 8, 3]
    # What keeps it fast: one Split of the fused QKV, one slice of activations (the class token's), and from torch
    # OpenVINO's fused GELU and MVN (two LayerNorms per block and the final one).
    types = collections.Counter(op.get_type_name() for op in graph.get_ops())
    slices = [
        op
        for op in graph.get_ops()
        if op.get_type_name() in ("StridedSlice", "Gather") and op.input(0).get_partial_shape().rank.get_length() > 1
    ]
    num_layers = TINY["num_layers"]
    assert types["Split"] == num_layers and len(slices) <= 1, types
    if keras.backend.backend() == "torch":
        assert types["MVN"] == 2 * num_layers + 1 and types["Gelu"] == num_layers, types


@pytest.mark.parametrize("case", ["feature_map", "saved_user_model", "user_model_scales_pixels"])
def test_a_feature_map_and_a_backbone_in_a_user_model_export_one_output_scaled_once(case, tmp_path):
    # The feature map's reshape computes the batch size too: still one output (OpenVINO first, where it showed).
    format = _cheapest_format(("openvino", "saved_model"))
    own_scaling = case == "user_model_scales_pixels"
    pooling = None if case == "feature_map" else "gap"
    model = backbone = VisionTransformer(
        **TINY, include_top=False, pooling=pooling, include_preprocessing=not own_scaling
    )
    if case != "feature_map":
        inputs = keras.Input((8, 8, 3))
        # The user's own scaling of raw pixels: the artefact must not scale them a second time.
        scaled = keras.layers.Rescaling(1 / 127.5, offset=-1.0)(inputs) if own_scaling else inputs
        model = keras.Model(inputs, keras.layers.Dense(2, name="user_head")(backbone(scaled)))
    helpers.randomize_weights(model)
    model.save(tmp_path / "model.keras")
    images = _images(2).astype("float32")
    path = deploy.export(str(tmp_path / "model.keras"), str(tmp_path / "out"), format=format, input_dtype="float32")
    assert _runtime_names(path, format) == _expected_names(format)
    expected = keras.ops.convert_to_numpy(model(images if own_scaling else preprocess_input(images)))
    np.testing.assert_allclose(deploy.load_artefact(path, format)(images), expected, atol=1e-4, rtol=0)


def test_a_mixed_precision_model_is_exported_computing_in_float32(tmp_path):
    # ONNX Runtime refused a mixed_bfloat16 graph; OpenVINO and LiteRT failed to convert one.
    format = _cheapest_format()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = _classifier()
    finally:
        keras.config.set_dtype_policy("float32")
    twin = VisionTransformer(**TINY, classes=3, classifier_activation=None)
    twin.set_weights(mixed.get_weights()[: len(twin.weights)])
    path = deploy.export(mixed, str(tmp_path / "mixed"), format=format)
    expected = keras.ops.convert_to_numpy(twin(_images().astype("float32")))
    np.testing.assert_allclose(deploy.load_artefact(path, format)(_images()), expected, atol=1e-5, rtol=0)


def test_export_refuses_bad_arguments_and_keras_quantized_models_and_names_its_files(tmp_path):
    model = _classifier()
    format = _cheapest_format()
    with pytest.raises(ValueError, match="tflite"):
        deploy.export(model, str(tmp_path / "vit"), format="tflite")
    with pytest.raises(ValueError, match="int32"):
        deploy.export(model, str(tmp_path / "vit"), format=format, input_dtype="int32")
    with pytest.raises(ValueError, match="class_names"):
        deploy.export(model, str(tmp_path / "vit"), format=format, class_names=["a"])
    with pytest.raises(ValueError, match="model.h5"):
        deploy.export(str(tmp_path / "model.h5"), str(tmp_path / "vit"), format=format)
    model.quantize("int8")
    for format in [format for format in ("openvino", "litert") if deploy.supported(format)[0]]:
        with pytest.raises(ValueError, match="quantized"):
            deploy.export(model, str(tmp_path / "quantized"), format=format)
    assert os.listdir(tmp_path) == []
    # A folder target gets a named file (`keras-vit export model.keras DIR/` once wrote a hidden DIR/.onnx).
    assert deploy.artefact_path("served/", "onnx", name="model") == os.path.join("served", "model.onnx")
    assert deploy.artefact_path("served/", "litert", name="vit_b16") == os.path.join("served", "vit_b16.tflite")
    assert deploy.artefact_path(ROOT, "openvino", name="model") == os.path.join(ROOT, "model.xml")
    assert deploy.artefact_path("served/vit", "onnx") == "served/vit.onnx"
    assert deploy.artefact_path("served/vit.onnx", "onnx") == "served/vit.onnx"
    # A SavedModel is a folder of its own: `out` names it.
    assert deploy.artefact_path("served/vit/", "saved_model") == "served/vit"
    assert deploy.artefact_path(ROOT, "saved_model") == ROOT
    # The README's four exports to one `out`: the ONNX file goes beside the SavedModel folder, not into it.
    (tmp_path / "vit").mkdir()
    (tmp_path / "vit" / "saved_model.pb").write_bytes(b"")
    assert deploy.artefact_path(str(tmp_path / "vit"), "onnx") == str(tmp_path / "vit.onnx")
    assert deploy.artefact_files("served/vit.tflite", "litert") == ["served/vit.tflite", "served/vit.class_names.json"]
    assert deploy.artefact_files("served/vit.xml", "openvino") == ["served/vit.xml", "served/vit.bin"]


@pytest.mark.parametrize("format", deploy.FORMATS)
def test_export_never_replaces_a_file(format, tmp_path, monkeypatch):
    # Any file the export would write, companions included, stops it (before the trace, and again before the
    # commit for one written meanwhile) and is left as it was.
    if not deploy.supported(format)[0]:
        pytest.skip(deploy.supported(format)[1])
    model = _classifier()
    targets = deploy.artefact_files(deploy.artefact_path(str(tmp_path / "vit"), format), format)

    def take(target):
        os.makedirs(target) if format == "saved_model" else files.write_text(target, "someone else's")

    def write_while_someone_writes(model, format, target, **options):
        folder = target if format == "saved_model" else os.path.dirname(target)
        for name in ["saved_model.pb"] if format == "saved_model" else [os.path.basename(t) for t in targets]:
            files.write_text(os.path.join(folder, name), "the export's")
        take(targets[-1])

    def refused(target):
        with pytest.raises(FileExistsError, match=re.escape(target)):
            deploy.export(model, str(tmp_path / "vit"), format=format)
        assert os.listdir(tmp_path) == [os.path.basename(target)]
        if format != "saved_model":
            assert open(target).read() == "someone else's"
        os.rmdir(target) if format == "saved_model" else os.remove(target)

    for target in targets:
        take(target)
        refused(target)
    monkeypatch.setattr(writers, "write", write_while_someone_writes)
    refused(targets[-1])
    # A file where the artefact's folder would be: one line before any work.
    (tmp_path / "notes.txt").write_text("someone's notes")
    with pytest.raises(NotADirectoryError, match="notes.txt"):
        deploy.export(model, str(tmp_path / "notes.txt" / "vit"), format=format)


def test_cli_exports_into_a_folder_and_names_unsupported_pairs(tmp_path, capsys, monkeypatch):
    import keras_vit_cli

    _classifier().save(tmp_path / "model.keras")
    format = _cheapest_format(("openvino", "saved_model"))  # a file format where it can
    # An existing folder for a file format (gets model.xml + model.bin); a new SavedModel folder given with "/".
    out = tmp_path / "served" if format == "openvino" else tmp_path / "served" / "vit"
    os.makedirs(tmp_path / "served")
    assert keras_vit_cli.main(["export", str(tmp_path / "model.keras"), f"{out}/", "--format", format]) == 0
    written = sorted(os.listdir(tmp_path / "served"))
    assert written == (["model.bin", "model.xml"] if format == "openvino" else ["vit"])
    assert f"wrote {deploy.artefact_path(f'{out}/', format, name='model')} " in capsys.readouterr().out
    unsupported = [f for f in deploy.FORMATS if not deploy.supported(f)[0]]
    if unsupported:
        argv = ["export", str(tmp_path / "model.keras"), str(tmp_path / "other"), "--format", unsupported[0]]
        assert keras_vit_cli.main(argv) == 2
        assert unsupported[0] in capsys.readouterr().err
    argv = ["export", str(tmp_path / "model.keras"), str(tmp_path / "q"), "--format", "saved_model", "--int8"]
    assert keras_vit_cli.main(argv) == 2
    assert "--int8" in capsys.readouterr().err
    # The same export again: refused in one line, the first artefact untouched.
    assert keras_vit_cli.main(["export", str(tmp_path / "model.keras"), f"{out}/", "--format", format]) == 1
    err = capsys.readouterr().err
    assert str(out) in err and len(err.strip().splitlines()) == 1
    assert sorted(os.listdir(tmp_path / "served")) == written
    # A constructor: refused before its weights are fetched (here they could not be: no network, no cache).
    taken = deploy.artefact_path(f"{tmp_path / 'taken'}/", format, name="vit_ti16")
    os.makedirs(taken) if format == "saved_model" else files.write_text(taken, "someone else's")
    argv = ["export", "Ti/16", f"{tmp_path / 'taken'}/", "--format", format, "--weights", "imagenet"]
    assert keras_vit_cli.main(argv) == 1
    assert taken in capsys.readouterr().err
    # A constructor with random weights at another size.
    built = []
    monkeypatch.setattr(deploy, "export", lambda model, out, **options: built.append(model) or out)
    argv = ["export", "Ti/16", str(tmp_path / "vit"), "--format", format, "--weights", "none", "--image-size", "32"]
    assert keras_vit_cli.main(argv) == 0, capsys.readouterr().err
    (model,) = built
    assert model.name == "vit_ti16" and model.input_shape == (None, 32, 32, 3)


# An export that SIGKILLs itself once the artefact is complete in its staging folder, before the commit.
KILLED_EXPORT = """
import os, signal, sys
from keras_vit import deploy
from keras_vit.deploy import writers

write = writers.write
writers.write = lambda *args, **kwargs: write(*args, **kwargs) or os.kill(os.getpid(), signal.SIGKILL)
deploy.export(sys.argv[1], sys.argv[2], format=sys.argv[3])
"""


# A folder (saved_model, the tensorflow run) or two files (openvino, the torch run).
@pytest.mark.skipif(keras.backend.backend() == "jax", reason="JAX exports the tensorflow run's saved_model folder")
def test_a_killed_export_leaves_no_artefact_and_the_next_one_succeeds(tmp_path):
    format = _cheapest_format()
    _classifier().save(tmp_path / "model.keras")
    served = tmp_path / "served"
    served.mkdir()
    argv = [sys.executable, "-c", KILLED_EXPORT, str(tmp_path / "model.keras"), str(served / "vit"), format]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
    (left,) = os.listdir(served)  # its temporary folder only: no artefact, whole or partial
    assert left.startswith(files.TEMP_PREFIX)
    path = deploy.export(str(tmp_path / "model.keras"), str(served / "vit"), format=format)
    artefacts = sorted(os.path.basename(p) for p in deploy.artefact_files(path, format))
    assert sorted(os.listdir(served)) == sorted([*artefacts, left])
    assert deploy.load_artefact(path, format)(_images()).shape == (3, 3)


def test_ctrl_c_during_an_export_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    import keras_vit_cli

    _classifier().save(tmp_path / "model.keras")
    (tmp_path / "served").mkdir()
    write = writers.write

    def write_then_interrupt(*args, **kwargs):
        write(*args, **kwargs)
        raise KeyboardInterrupt  # once the artefact is written, before the commit

    monkeypatch.setattr(writers, "write", write_then_interrupt)
    argv = ["export", str(tmp_path / "model.keras"), str(tmp_path / "served" / "vit"), "--format", _cheapest_format()]
    assert keras_vit_cli.main(argv) == 130
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "interrupted" in err
    assert os.listdir(tmp_path / "served") == []  # no artefact, and the temporary folder removed on the way out


@pytest.mark.parametrize("format", deploy.INT8_FORMATS)
def test_int8_artefact_runs_int8_kernels_and_agrees_with_float32(format, tmp_path):
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the int8 formats are written on the TensorFlow backend; one backend is enough")
    # LiteRT leaves weights with fewer than 1024 elements float: hidden 32 makes the attention and MLP int8.
    model = _classifier(hidden_dim=32, mlp_dim=64)
    images = np.random.default_rng(1).integers(0, 256, size=(32, 8, 8, 3)).astype("uint8")
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
    assert deploy.artefact_class_names(path, format) == NAMES
    assert _runtime_names(path, format) == _expected_names(format)
    with pytest.raises(ValueError, match="saved_model"):
        deploy.export(model, str(tmp_path / "saved"), format="saved_model", int8=True)
    with pytest.raises(ValueError, match="yes"):
        deploy.export(model, str(tmp_path / "onnx"), format="onnx", int8="yes")
    assert not (tmp_path / "saved").exists() and not (tmp_path / "onnx.onnx").exists()


# Tiny models (32 px) that together hold every family option (docs/family.md): DeiT's distillation token with
# DINOv2's registers, layer scale and per-channel mean and std (QuickGELU); SigLIP's MAP head with CLIP's pre-norm;
# then the position schemes (RoPE).
FAMILY = {
    "deit_dinov2": dict(
        distillation_token=True,
        num_register_tokens=2,
        no_embed_class=True,
        layer_scale_init=0.1,
        mlp_activation="quick_gelu",
        pixel_mean=(0.485, 0.456, 0.406),
        pixel_std=(0.229, 0.224, 0.225),
        classes=3,
        classifier_activation=None,
    ),
    "siglip_clip": dict(
        class_token=False,
        pooling="map",
        fc_norm=True,
        mlp_activation="gelu_tanh",
        pre_norm=True,
        patch_bias=False,
        layer_norm_epsilon=1e-5,
        include_top=False,
    ),
    # RoPE on a non-square grid: DINOv3's options, and Naver's learned mixed frequencies (a weight, one row per
    # block) with a learned table too (EVA-02's pair).
    "dinov3": dict(
        hidden_dim=32,
        num_layers=2,
        input_shape=(32, 24, 3),
        num_register_tokens=4,
        position_embedding=False,
        rope=dict(rope_type="dinov3", temperature=100.0, rotate_half=True),
        layer_scale_init=0.1,
        layer_norm_epsilon=1e-5,
        mlp_activation="swiglu",
        include_top=False,
        pooling="token",
    ),
    "mixed_rope_and_table": dict(
        hidden_dim=32,
        num_layers=2,
        input_shape=(24, 32, 3),
        num_register_tokens=1,
        rope=dict(rope_type="mixed", temperature=10.0),
        classes=3,
        classifier_activation=None,
    ),
}


def _max_rank(path, format):
    """The highest rank of a tensor in an ONNX, LiteRT or OpenVINO artefact (None for a SavedModel)."""
    if format == "onnx":
        import onnx

        graph = onnx.shape_inference.infer_shapes(onnx.load(path)).graph
        values = [*graph.input, *graph.value_info, *graph.output]
        return max(len(v.type.tensor_type.shape.dim) for v in values if v.type.tensor_type.HasField("shape"))
    if format == "litert":
        from ai_edge_litert.interpreter import Interpreter

        return max(len(detail["shape"]) for detail in Interpreter(model_path=path).get_tensor_details())
    if format == "openvino":
        import openvino as ov

        graph = ov.Core().read_model(path)
        return max(output.get_partial_shape().rank.get_length() for op in graph.get_ops() for output in op.outputs())
    return None


@pytest.mark.parametrize("family", FAMILY)
def test_family_models_export_to_every_format_of_the_backend_within_1e4(family, tmp_path):
    model = VisionTransformer(**{**TINY, "patch_size": 8, "input_shape": (32, 32, 3), **FAMILY[family]})
    helpers.randomize_weights(model)
    size = model.input_shape[1:3]
    images = np.random.default_rng(0).integers(0, 256, size=(2, *size, 3)).astype("uint8")
    expected = keras.ops.convert_to_numpy(model(images.astype("float32")))
    model.save(tmp_path / "model.keras")  # as `keras-vit export` takes it
    for format in [format for format in deploy.FORMATS if deploy.supported(format)[0]]:
        path = deploy.export(str(tmp_path / "model.keras"), str(tmp_path / format), format=format)
        actual = deploy.load_artefact(path, format)(images)
        np.testing.assert_allclose(actual, expected, atol=1e-4, rtol=0, err_msg=format)
        # At most 5-D (the fused QKV's reshape): a RoPE written with 6-D tensors broke LiteRT elsewhere.
        assert (_max_rank(path, format) or 0) <= 5, format


def test_a_naflex_model_exports_to_every_format_of_the_backend_within_1e4(tmp_path, capsys):
    import keras_vit_cli

    # SigLIP 2's native aspect ratio: a learned table resized per image grid, registers, DINOv3's RoPE per image
    # grid and the masked MAP head, on a padded batch of three grids at the fixed length.
    rope = dict(rope_type="dinov3", temperature=100.0, rotate_half=True)
    naflex = dict(input_shape=(None, None, 3), embedding_grid=(3, 3), num_register_tokens=2, rope=rope, pooling="map")
    model = VisionTransformer(**dict(TINY, **naflex), max_num_patches=12, classes=3, classifier_activation=None)
    helpers.randomize_weights(model)
    model = metadata.with_class_names(model, NAMES)  # as `keras-vit finetune --naflex` saves it
    batch = helpers.naflex_batch(helpers.pixel_images((8, 12), (12, 16), (4, 8)), 4, 12)
    (expected,) = helpers.reference_outputs(model, batch)
    model.save(tmp_path / "model.keras")
    formats = [format for format in deploy.FORMATS if deploy.supported(format)[0]]
    for format in formats:
        path = deploy.artefact_path(str(tmp_path / format), format)
        assert keras_vit_cli.main(["export", str(tmp_path / "model.keras"), path, "--format", format]) == 0
        assert f"wrote {path} " in (out := capsys.readouterr().out) and "mask (None, 12) bool" in out
        run = deploy.load_artefact(path, format)
        np.testing.assert_allclose(run(batch), expected, atol=1e-4, rtol=0, err_msg=format)
        first = {name: value[:1] for name, value in batch.items()}  # the batch size is dynamic
        np.testing.assert_allclose(run(first), expected[:1], atol=1e-4, rtol=0, err_msg=format)
        inputs, outputs = _runtime_names(path, format)
        assert (sorted(inputs), outputs) == _expected_names(format, inputs=sorted(batch)), format
        assert deploy.artefact_class_names(path, format) == NAMES
    with pytest.raises(ValueError, match="float32 patches"):
        deploy.export(model, str(tmp_path / "uint8"), format=formats[0], input_dtype="uint8")
