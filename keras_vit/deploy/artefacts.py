"""Export a keras_vit model as a serving artefact (docs/deploy.md), and run the artefact in its own runtime.

Every artefact has one input, `images` (channels-last RGB pixels in [0, 255], any batch, the model's resolution) and
one output, `outputs`; a NaFlex model's (`max_num_patches`) takes its dict (`patches`, `spatial_shapes`, `mask`). An
export never replaces a file and appears whole or not at all.
"""

import collections
import json
import logging
import os

import keras
import numpy as np

from keras_vit.deploy import writers
from keras_vit.deploy.writers import OUTPUT_NAME
from keras_vit.models import metadata
from keras_vit.utils import extras, files, keras_compat, validation

FORMATS = ("saved_model", "onnx", "litert", "openvino")
INPUT_DTYPES = ("uint8", "float32")
INT8_FORMATS = ("litert", "onnx")
UNSUPPORTED = {
    ("onnx", "jax"): "Keras exports ONNX from JAX through `jax2onnx` (flax, orbax), which keras_vit does not pin",
    ("saved_model", "torch"): "Keras exports a SavedModel from the TensorFlow and JAX backends only",
    ("onnx", "torch"): "Keras 3.15's torch ONNX export fails on keras.ops.layer_normalization's shape arithmetic",
    ("openvino", "jax"): "OpenVINO cannot convert the XlaCallModule op that JAX's TensorFlow bridge emits",
    ("litert", "jax"): "Keras exports LiteRT from the TensorFlow backend (and torch with litert-torch) only",
    ("litert", "torch"): "Keras exports LiteRT from torch through `litert-torch`, which keras_vit does not pin",
}
# Each format's suffix, the modules Keras's exporter imports for it, and the runtime that runs the artefact.
_Format = collections.namedtuple("_Format", ["suffix", "export_modules", "runtime"])
_FORMATS = {
    "saved_model": _Format("", ("tensorflow",), "tensorflow"),
    "onnx": _Format(".onnx", ("tensorflow", "tf2onnx", "onnx"), "onnxruntime"),
    "litert": _Format(".tflite", ("tensorflow",), "ai_edge_litert"),
    "openvino": _Format(".xml", ("openvino",), "openvino"),
}


def supported(format, backend=None):
    """`(True, "")` if the Keras backend (default: the active one) can write `format`, else `(False, reason)`."""
    validation.one_of("format", format, FORMATS)
    reason = UNSUPPORTED.get((format, backend or keras.backend.backend()))
    return (reason is None, reason or "")


def artefact_path(out, format, name="model"):
    """The file or folder `export` writes for `format` at `out`; in a folder `out`, `name` + the format's suffix."""
    validation.one_of("format", format, FORMATS)
    out = os.fspath(out)
    suffix = _FORMATS[format].suffix
    if not suffix:
        return out.rstrip("/" + os.sep) or out
    saved_model = os.path.isfile(os.path.join(out, "saved_model.pb"))
    if out.endswith(("/", os.sep)) or (os.path.isdir(out) and not saved_model):
        out = os.path.join(out, name)
    return out if out.endswith(suffix) else out + suffix


def artefact_files(path, format):
    """Every file `export` may write for the artefact at `path`, the artefact first."""
    if format == "openvino":
        return [path, path[: -len(".xml")] + ".bin"]
    if format == "litert":
        return [path, writers.class_names_path(path, format)]
    return [path]


def is_naflex(model):
    """Whether `model` takes a NaFlex dict (`VisionTransformer(max_num_patches=N)`)."""
    return isinstance(model.input, dict)


def serving_model(model, input_dtype=None):
    """A float32 functional model around `model` whose input `images` takes `[0, 255]` pixels of `input_dtype`
    (default uint8); a NaFlex model serves as itself, in float32, taking its float32 patches as it always does."""
    naflex = is_naflex(model)
    input_dtype = input_dtype or ("float32" if naflex else "uint8")
    validation.one_of("input_dtype", input_dtype, INPUT_DTYPES)
    model = float32_copy(model)
    if naflex:
        if input_dtype != "float32":
            raise ValueError("A NaFlex artefact takes float32 patches, as the model does: pass input_dtype='float32'.")
        # Keras exports only models that have been called: symbolically here (JAX would compile each op eagerly).
        model({name: keras.KerasTensor(x.shape, x.dtype) for name, x in model.input.items()})
        return model
    shape = tuple(model.input_shape[1:])
    if len(shape) != 3 or None in shape:
        raise ValueError(
            "The model to export must take images of a fixed (height, width, channels). "
            f"Received: input_shape={model.input_shape}"
        )
    inputs = keras.Input(shape=shape, dtype=input_dtype, name="images")
    # x / 127.5 - 1, unless the ViT (include_preprocessing=True) or the user's model around it scales pixels itself.
    vit = metadata.find_vit(model)
    scaling_layers = (keras.layers.Rescaling, keras.layers.Normalization)
    around = vit is not model and any(isinstance(layer, scaling_layers) for layer in model.layers)
    own_scaling = vit.include_preprocessing or around
    scale, offset = (1.0, 0.0) if own_scaling else (1.0 / 127.5, -1.0)
    scaled = keras.layers.Rescaling(scale, offset=offset, name="pixel_scaling")(inputs)
    serving = keras.Model(inputs, model(scaled), name=f"{model.name}_serving")
    # Keras exports only models that have run once.
    serving(np.zeros((1, *shape), input_dtype))
    return serving


def _layers(model):
    return [model, *keras_compat.sublayers(model)]


def float32_copy(model):
    """`model` rebuilt in float32 if mixed-precision: the runtimes refuse or fail to convert mixed graphs."""

    def mixed(value):
        return isinstance(value, str) and value.startswith("mixed_")

    quantized = any(layer.quantization_mode is not None for layer in _layers(model))
    if quantized or not any(mixed(layer.dtype_policy.name) for layer in _layers(model)):
        return model

    def to_float32(node):
        # A layer's policy is serialized as a `DTypePolicy` entry, or as a bare name under "dtype".
        if isinstance(node, list):
            return [to_float32(value) for value in node]
        if not isinstance(node, dict):
            return node
        if node.get("class_name") == "DTypePolicy" and mixed(node["config"].get("name")):
            return {**node, "config": {**node["config"], "name": "float32"}}
        return {key: "float32" if key == "dtype" and mixed(value) else to_float32(value) for key, value in node.items()}

    copy = keras.saving.deserialize_keras_object(to_float32(keras.saving.serialize_keras_object(model)))
    copy.set_weights(model.get_weights())
    return copy


def check_target(out, format, name="model"):
    """The artefact's path, after checking that `export` can write there without replacing anything."""
    path = artefact_path(out, format, name=name)
    files.check_output_folder(os.path.dirname(os.path.abspath(path)))
    for existing in artefact_files(path, format):
        if os.path.lexists(existing):
            what = "a folder" if os.path.isdir(existing) else "a file"
            raise FileExistsError(
                f"{existing} exists ({what}) and an export never replaces one: choose a new path or remove it first."
            )
    return path


def check_arguments(format, input_dtype=None, int8=False):
    """Refuses in one line what `export` cannot do here (the format on this backend, its packages) before any work."""
    ok, reason = supported(format)  # checks `format` first
    if input_dtype is not None:
        validation.one_of("input_dtype", input_dtype, INPUT_DTYPES)
    validation.boolean("int8", int8)
    if int8 and format not in INT8_FORMATS:
        raise ValueError(
            f"int8=True is available for the formats {INT8_FORMATS}. Received: format={format!r}, int8=True. "
            "Export with format='litert' or 'onnx', or export float32 (int8=False)."
        )
    if not ok:
        raise ValueError(
            f"format={format!r} cannot be exported on the {keras.backend.backend()} backend: {reason}. "
            "Set KERAS_BACKEND=tensorflow (every format) or see the README's Deploy table."
        )
    needed = _FORMATS[format].export_modules + (("onnxruntime",) if int8 and format == "onnx" else ())
    extras.check(*needed, needed_for=f"a {format} export", extra="deploy")


def export(model_or_path, out, format="saved_model", input_dtype=None, class_names=None, int8=False, verbose=False):
    """Exports a keras_vit model as a serving artefact.

    Args:
        model_or_path: a `keras.Model` holding a keras_vit ViT, or a `.keras` file's path.
        out: the artefact's path (see `artefact_path`); nothing the export would write may exist yet.
        format: one of `FORMATS`. Defaults to `"saved_model"`.
        input_dtype: `"uint8"` (default) or `"float32"` pixels in [0, 255]. A NaFlex model's artefact takes its
            dict at its fixed length N in every runtime: `patches` float32 (as the model takes them),
            `spatial_shapes` int32 and `mask` bool (each runtime takes bool inputs).
        class_names: optional list of str stored with the artefact. Defaults to the names saved in the model.
        int8: bool, a post-training int8 artefact without calibration (`INT8_FORMATS`; docs/deploy-int8.md).
        verbose: bool, let Keras print its export messages.

    Returns:
        The artefact's path.

    Example:

    >>> import tempfile, keras_vit
    >>> model = keras_vit.VisionTransformer(
    ...     patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32,
    ...     input_shape=(16, 16, 3), classes=2)
    >>> format = "openvino" if supported("openvino")[0] else "saved_model"  # JAX: no OpenVINO
    >>> path = export(model, tempfile.mkdtemp() + "/vit", format=format)
    >>> load_artefact(path, format)(np.zeros((3, 16, 16, 3), "uint8")).shape
    (3, 2)
    """
    check_arguments(format, input_dtype, int8)
    # In a folder target, the artefact is named after the model, or the `.keras` file's stem.
    if isinstance(model_or_path, keras.Model):
        source = model_or_path
        path = check_target(out, format, name=source.name)
    elif isinstance(model_or_path, (str, os.PathLike)) and os.fspath(model_or_path).endswith(".keras"):
        path = check_target(out, format, name=os.path.splitext(os.path.basename(os.fspath(model_or_path)))[0])
        source = metadata.load_classifier(os.fspath(model_or_path))
    else:
        raise ValueError(
            f"`model_or_path` must be a keras.Model or a `.keras` file. Received: model_or_path={model_or_path!r}"
        )
    if format in ("openvino", "litert") and any(layer.quantization_mode is not None for layer in _layers(source)):
        raise ValueError(
            f"A model quantized by Keras cannot be exported to {format}: the conversion of its int8 layers fails "
            "(LiteRT) or gives other outputs (OpenVINO). Export the float32 model with int8=True (LiteRT), or "
            "export this one as onnx or saved_model."
        )
    model = serving_model(source, input_dtype=input_dtype)
    class_names = metadata.class_names(source) if class_names is None else class_names
    if class_names is not None:
        class_names = [str(name) for name in class_names]
        if model.output_shape[-1] != len(class_names):
            raise ValueError(
                f"`class_names` has {len(class_names)} names but the model has {model.output_shape[-1]} outputs. "
                f"Received: class_names={class_names[:5]}..."
            )
    options = dict(class_names=class_names, int8=int8, verbose=verbose)
    if format == "saved_model":
        with files.atomic_directory(path, replace=False) as staged:
            writers.write(model, format, staged, **options)
        return path
    names = [os.path.basename(target) for target in artefact_files(path, format)]
    if format == "litert" and class_names is None:
        names = names[:1]
    with files.atomic_files(os.path.dirname(os.path.abspath(path)), names, replace=False) as staged:
        writers.write(model, format, staged[names[0]], **options)
    return path


def _not_the_custom_gradient_notice(record):
    # jax2tf's SavedModel makes TensorFlow warn on each load that custom gradients were not saved: serving needs none.
    return "with ops with unsaved custom gradients" not in record.getMessage()


def _feeds(inputs, name):
    return dict(inputs) if isinstance(inputs, dict) else {name: inputs}


def load_artefact(path, format):
    """Loads an exported artefact in its own runtime: a function from a NumPy batch of images (a NaFlex artefact:
    its dict of NumPy arrays) to its output."""
    validation.one_of("format", format, FORMATS)
    extras.check(_FORMATS[format].runtime, needed_for=f"running a {format} artefact", extra="deploy")
    if format == "saved_model":
        import tensorflow as tf

        absl = logging.getLogger("absl")
        absl.addFilter(_not_the_custom_gradient_notice)
        try:
            loaded = tf.saved_model.load(path)
        finally:
            absl.removeFilter(_not_the_custom_gradient_notice)

        def run(inputs):
            outputs = loaded.serve(tf.nest.map_structure(tf.constant, inputs))
            return (outputs[OUTPUT_NAME] if isinstance(outputs, dict) else outputs).numpy()

        return run
    if format == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        return lambda inputs: session.run(None, _feeds(inputs, name))[0]
    if format == "litert":
        from ai_edge_litert.interpreter import Interpreter

        signature = Interpreter(model_path=path).get_signature_runner()
        name = next(iter(signature.get_input_details()))
        return lambda inputs: next(iter(signature(**_feeds(inputs, name)).values()))
    import openvino as ov

    # As exported: on a CPU with native bfloat16 OpenVINO would otherwise compute in bfloat16.
    compiled = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return lambda inputs: compiled(_feeds(inputs, writers.INPUT_NAME))[0]


def artefact_class_names(path, format):
    """The class names stored with an artefact, or `None` (OpenVINO's with `_` for spaces)."""
    validation.one_of("format", format, FORMATS)
    if format == "onnx":
        import onnx

        stored = {entry.key: entry.value for entry in onnx.load(path, load_external_data=False).metadata_props}
        return json.loads(stored["class_names"]) if "class_names" in stored else None
    if format == "openvino":
        import openvino as ov

        ov_model, key = ov.Core().read_model(path), ["model_info", "labels"]
        return ov_model.get_rt_info(key).astype(str).split() if ov_model.has_rt_info(key) else None
    names_file = writers.class_names_path(path, format)
    if not os.path.isfile(names_file):
        return None
    with open(names_file) as handle:
        return json.load(handle)
