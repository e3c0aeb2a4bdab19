"""Export a keras_vit model as a serving artefact, and run the artefact.

`export(model_or_path, out, format)` writes a TensorFlow SavedModel, an ONNX
file, a LiteRT (`.tflite`) flatbuffer or an OpenVINO IR (`.xml` + `.bin`)
(`keras_vit.deploy.writers`). The artefact takes what a serving client has,
one input `images`: a batch of RGB images with pixels in [0, 255] (`uint8`
by default, `float32` on request), channels last; the ViT scaling to
[-1, 1] is inside it. It has one output, `outputs` (the model's
`[batch, classes]`, or its feature map), named so in every format. The batch
size is dynamic; the resolution is the model's (fixed).

Where it goes: `out` names the artefact (the format's suffix is added when
missing); a path ending in `/`, or an existing folder (not a SavedModel),
gets `<name>.<suffix>` inside it, `<name>` being the `.keras` file's stem or
the model's name. A SavedModel is a folder of its own: `out` is that folder.
An export never replaces a file: when any file it would write exists, it
refuses before any work. It is staged next to the target through
`keras_vit.utils.files` and appears whole or not at all (a killed export
may leave a `.keras_vit-tmp-*` folder beside it, never a partial artefact).

`load_artefact(path, format)` runs an artefact in its own runtime
(TensorFlow, ONNX Runtime, LiteRT, OpenVINO), never through Keras, for the
parity tests and the benchmark.

Which Keras backend can write which format (Keras 3.15):

| format | tensorflow | jax | torch |
|---|---|---|---|
| saved_model | yes | yes (jax2tf) | no |
| onnx | yes (tf2onnx) | no (needs `jax2onnx`) | no (the exporter fails on the attention) |
| litert | yes | no | no (needs `litert-torch`) |
| openvino | yes | no (XlaCallModule) | yes (TorchScript trace) |

`UNSUPPORTED` holds the reasons; `export` raises them.

`export(..., int8=True)` writes a post-training int8 artefact for the formats
in `INT8_FORMATS`, without a calibration set: LiteRT dynamic-range
quantization (int8 weights; XNNPACK quantizes activations per call) and ONNX
Runtime dynamic quantization (`quantize_onnx_int8`). Which is faster than
float32 depends on the model size and the CPU: see docs/deploy-int8.md.
"""

import contextlib
import json
import logging
import os

import keras
import numpy as np

from keras_vit.deploy import writers
from keras_vit.deploy.writers import CLASS_NAMES_FILE, OUTPUT_NAME
from keras_vit.models import metadata
from keras_vit.utils import extras, files, keras_compat, validation

FORMATS = ("saved_model", "onnx", "litert", "openvino")
INPUT_DTYPES = ("uint8", "float32")
_SUFFIXES = {"saved_model": "", "onnx": ".onnx", "litert": ".tflite", "openvino": ".xml"}
# The backends on which Keras 3.15 writes each format, and why not elsewhere.
UNSUPPORTED = {
    ("onnx", "jax"): "Keras 3.15 exports ONNX from JAX through the `jax2onnx` package, which pulls in flax, orbax "
    "and tensorstore; keras_vit does not pin it",
    ("saved_model", "torch"): "Keras exports a SavedModel from the TensorFlow and JAX backends only",
    ("onnx", "torch"): "Keras 3.15's torch ONNX export fails on its layer normalization's shape arithmetic "
    "(torch.onnx SymbolicValueError on a Gather in keras.ops.layer_normalization)",
    ("openvino", "jax"): "OpenVINO cannot convert the XlaCallModule op that JAX's TensorFlow bridge emits",
    ("litert", "jax"): "Keras exports LiteRT from the TensorFlow backend (and torch with litert-torch) only",
    ("litert", "torch"): "Keras exports LiteRT from torch through the separate `litert-torch` package, "
    "which keras_vit does not pin",
}
# What Keras's exporter imports for each format (SavedModel from JAX goes through jax2tf, TensorFlow), and
# the runtime that runs the artefact (`load_artefact`): all of them come with the `deploy` extra.
EXPORT_MODULES = {
    "saved_model": ("tensorflow",),
    "onnx": ("tensorflow", "tf2onnx", "onnx"),
    "litert": ("tensorflow",),
    "openvino": ("openvino",),
}
RUNTIME_MODULES = {
    "saved_model": "tensorflow",
    "onnx": "onnxruntime",
    "litert": "ai_edge_litert",
    "openvino": "openvino",
}
# Post-training int8 without calibration (see the module docstring).
INT8_FORMATS = ("litert", "onnx")


def supported(format, backend=None):
    """Whether the Keras backend (default: the active one) can write `format`.

    Returns:
        `(True, "")` or `(False, reason)`.
    """
    validation.one_of("format", format, FORMATS)
    backend = backend or keras.backend.backend()
    reason = UNSUPPORTED.get((format, backend))
    return (reason is None, reason or "")


def artefact_path(out, format, name="model"):
    """The file or folder `export` writes for `format` at `out`.

    `out` with the format's suffix added when missing; for the file formats,
    a path ending in `/`, or an existing folder that is not a SavedModel,
    gets `name` + suffix inside it (so `served/vit` means `served/vit.onnx`
    beside a SavedModel `served/vit`). A SavedModel is a folder: `out`
    itself (a trailing `/` dropped).

    >>> artefact_path("served/", "onnx", name="vit")
    'served/vit.onnx'
    >>> artefact_path("served/vit", "openvino")
    'served/vit.xml'
    >>> artefact_path("served/vit/", "saved_model")
    'served/vit'
    """
    validation.one_of("format", format, FORMATS)
    out = os.fspath(out)
    suffix = _SUFFIXES[format]
    saved_model = os.path.isfile(os.path.join(out, "saved_model.pb"))
    folder = out.endswith(("/", os.sep)) or (os.path.isdir(out) and not saved_model)
    if not suffix:
        return out.rstrip("/" + os.sep) or out
    if folder:
        out = os.path.join(out, name)
    return out if out.endswith(suffix) else out + suffix


def artefact_files(path, format):
    """Every file `export` may write for the artefact at `path` (the artefact first).

    >>> artefact_files("served/vit.xml", "openvino")
    ['served/vit.xml', 'served/vit.bin']
    >>> artefact_files("served/vit.tflite", "litert")
    ['served/vit.tflite', 'served/vit.class_names.json']
    """
    if format == "openvino":
        return [path, path[: -len(".xml")] + ".bin"]
    if format == "litert":
        return [path, writers.class_names_path(path)]
    return [path]


def serving_model(model, input_dtype="uint8"):
    """Wraps `model` so it takes raw pixels: `(batch, H, W, 3)` in [0, 255].

    Args:
        model: a keras_vit model (or a model containing one): one that
            scales raw pixels itself (`include_preprocessing=True`) or one
            that takes images scaled to [-1, 1].
        input_dtype: `"uint8"` or `"float32"`, the dtype of the pixels.

    Returns:
        A functional `keras.Model` whose input is named `images`.
    """
    validation.one_of("input_dtype", input_dtype, INPUT_DTYPES)
    model = float32_copy(model)
    shape = tuple(model.input_shape[1:])
    if len(shape) != 3 or None in shape:
        raise ValueError(
            "The model to export must take images of a fixed (height, width, channels). "
            f"Received: input_shape={model.input_shape}"
        )
    inputs = keras.Input(shape=shape, dtype=input_dtype, name="images")
    # Rescaling casts to float32 first: x / 127.5 - 1, the ViT preprocessing, unless the ViT
    # scales raw pixels itself (include_preprocessing=True, the default), or the user's model around
    # it scales them in its own layers (a Rescaling or Normalization of its own): then only the cast.
    own_scaling = metadata.find_vit(model).include_preprocessing or _scales_pixels_around_the_vit(model)
    scale, offset = (1.0, 0.0) if own_scaling else (1.0 / 127.5, -1.0)
    scaled = keras.layers.Rescaling(scale, offset=offset, name="pixel_scaling")(inputs)
    serving = keras.Model(inputs, model(scaled), name=f"{model.name}_serving")
    # Keras exports only models that have run once (it traces their call).
    serving(np.zeros((1, *shape), input_dtype))
    return serving


def _scales_pixels_around_the_vit(model):
    """Whether a user's model holding the ViT has pixel-scaling layers of its own (outside the ViT)."""
    if metadata.find_vit(model) is model:
        return False
    return any(isinstance(layer, (keras.layers.Rescaling, keras.layers.Normalization)) for layer in model.layers)


def _policy_names(model):
    return {layer.dtype_policy.name for layer in [model, *keras_compat.sublayers(model)]}


def is_quantized(model):
    """Whether any layer of `model` runs quantized (`model.quantize(...)`)."""
    return any(layer.quantization_mode is not None for layer in [model, *keras_compat.sublayers(model)])


def float32_copy(model):
    """`model` computing in float32: a mixed-precision model rebuilt with float32 layers and its own weights.

    Mixed precision keeps the weights in float32 and computes in bfloat16 or
    float16; an artefact computes in float32, which every runtime runs (ONNX
    Runtime refuses a graph mixing float16 and bfloat16; OpenVINO and LiteRT
    fail to convert one). Other models are returned as they are.
    """
    if is_quantized(model) or not any(name.startswith("mixed_") for name in _policy_names(model)):
        return model

    def mixed(value):
        return isinstance(value, str) and value.startswith("mixed_")

    def to_float32(node):
        # A layer's policy is serialized as a `DTypePolicy` entry, or as a bare name under "dtype".
        if isinstance(node, dict):
            if node.get("class_name") == "DTypePolicy" and mixed(node["config"].get("name")):
                return {**node, "config": {**node["config"], "name": "float32"}}
            return {
                key: "float32" if key == "dtype" and mixed(value) else to_float32(value) for key, value in node.items()
            }
        if isinstance(node, list):
            return [to_float32(value) for value in node]
        return node

    copy = keras.saving.deserialize_keras_object(to_float32(keras.saving.serialize_keras_object(model)))
    copy.set_weights(model.get_weights())
    return copy


def check_target(out, format, name="model"):
    """Checks, before any work, that `export` can write its artefact at `out`.

    Args:
        out, format, name: as for `artefact_path` (`name`: the model's name
            or the `.keras` file's stem, for a folder target).

    Returns:
        The artefact's path (`artefact_path`).

    Raises:
        FileExistsError: a file or folder the export would write exists (an
            export never replaces one).
        NotADirectoryError, FileNotFoundError, PermissionError: the folder
            it would write into cannot hold it (`files.check_output_folder`).
    """
    path = artefact_path(out, format, name=name)
    files.check_output_folder(os.path.dirname(os.path.abspath(path)))  # a file in the way, no write access
    for existing in artefact_files(path, format):
        if os.path.lexists(existing):
            what = "a folder" if os.path.isdir(existing) else "a file"
            raise FileExistsError(
                f"{existing} exists ({what}) and an export never replaces one: choose a new path or remove it first."
            )
    return path


def _check_source(model_or_path):
    if isinstance(model_or_path, keras.Model):
        return
    if not (isinstance(model_or_path, (str, os.PathLike)) and os.fspath(model_or_path).endswith(".keras")):
        raise ValueError(
            f"`model_or_path` must be a keras.Model or a `.keras` file. Received: model_or_path={model_or_path!r}"
        )


def _load(model_or_path):
    if isinstance(model_or_path, keras.Model):
        return model_or_path
    return metadata.load_classifier(os.fspath(model_or_path))


def _check_arguments(format, input_dtype, int8):
    validation.one_of("format", format, FORMATS)
    validation.one_of("input_dtype", input_dtype, INPUT_DTYPES)
    validation.boolean("int8", int8)
    if int8 and format not in INT8_FORMATS:
        raise ValueError(
            f"int8=True is available for the formats {INT8_FORMATS}. Received: format={format!r}, int8=True. "
            "Export with format='litert' or 'onnx', or export float32 (int8=False)."
        )
    ok, reason = supported(format)
    if not ok:
        raise ValueError(
            f"format={format!r} cannot be exported on the {keras.backend.backend()} backend: {reason}. "
            "Set KERAS_BACKEND=tensorflow (every format) or see the README's Deploy table."
        )
    # Checked before the model is loaded or traced.
    needed = EXPORT_MODULES[format] + (("onnxruntime",) if int8 and format == "onnx" else ())
    extras.check(*needed, needed_for=f"a {format} export", extra="deploy")


def _default_name(model_or_path):
    """The artefact's name in a folder target: the `.keras` file's stem, or the model's name."""
    if isinstance(model_or_path, keras.Model):
        return model_or_path.name
    return os.path.splitext(os.path.basename(os.fspath(model_or_path)))[0]


def _class_names(source, model, class_names):
    class_names = metadata.class_names(source) if class_names is None else class_names
    if class_names is None:
        return None
    class_names = [str(name) for name in class_names]
    if model.output_shape[-1] != len(class_names):
        raise ValueError(
            f"`class_names` has {len(class_names)} names but the model has {model.output_shape[-1]} outputs. "
            f"Received: class_names={class_names[:5]}..."
        )
    return class_names


def export(model_or_path, out, format="saved_model", input_dtype="uint8", class_names=None, int8=False, verbose=False):
    """Exports a keras_vit model as a serving artefact.

    The artefact has one input, `images` (`INPUT_NAME`), and one output,
    `outputs` (`OUTPUT_NAME`), in every format.

    Args:
        model_or_path: a `keras.Model` (a constructor's output, a backbone
            inside a user's model...) or the path of a `.keras` file such as
            the `finetune` job's `model.keras`.
        out: the artefact's path; the format's suffix (`.onnx`, `.tflite`,
            `.xml`) is added when missing. A path ending in `/`, or an
            existing folder (not a SavedModel), gets `<name>.<suffix>` inside it (`<name>`: the
            `.keras` file's stem or the model's name; see `artefact_path`).
            Nothing the export would write may exist yet (`artefact_files`):
            an export never replaces a file.
        format: one of `"saved_model"`, `"onnx"`, `"litert"`, `"openvino"`.
        input_dtype: `"uint8"` (default) or `"float32"` pixels in [0, 255].
        class_names: optional list of str stored with the artefact (default:
            the names saved in the model, `keras_vit.models.metadata.class_names`): ONNX
            metadata `class_names` (JSON), OpenVINO `model_info/labels`,
            `assets.extra/class_names.json` in a SavedModel, and for
            `vit.tflite` the file `vit.class_names.json` beside it.
            `artefact_class_names` reads them back.
        int8: bool, write a post-training int8 artefact instead of float32
            (`format="litert"`: dynamic-range quantization, int8 weights,
            run by XNNPACK's int8 kernels; `format="onnx"`: ONNX Runtime
            dynamic quantization, int8 MatMul weights per channel). No
            calibration set is needed. Other formats raise `ValueError`.
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
    _check_arguments(format, input_dtype, int8)
    _check_source(model_or_path)
    path = check_target(out, format, name=_default_name(model_or_path))
    targets = artefact_files(path, format)
    source = _load(model_or_path)
    if is_quantized(source) and format in ("openvino", "litert"):
        raise ValueError(
            f"A model quantized by Keras cannot be exported to {format}: the conversion of its int8 layers fails "
            "(LiteRT) or gives other outputs (OpenVINO). Export the float32 model with int8=True (LiteRT), or "
            "export this one as onnx or saved_model."
        )
    model = serving_model(source, input_dtype=input_dtype)
    class_names = _class_names(source, model, class_names)
    options = dict(class_names=class_names, int8=int8, verbose=verbose)
    if format == "saved_model":
        with files.atomic_directory(path, replace=False) as staged:
            writers.write(model, format, staged, **options)
        return path
    # One set: the OpenVINO .xml with its .bin, the .tflite with its class names.
    names = [os.path.basename(target) for target in targets]
    if format == "litert" and class_names is None:
        names = names[:1]
    with files.atomic_files(os.path.dirname(os.path.abspath(path)), names, replace=False) as staged:
        writers.write(model, format, staged[names[0]], **options)
    return path


class _CustomGradientNotice(logging.Filter):
    """TensorFlow's warning, on loading a SavedModel written from JAX (jax2tf), that its functions' custom
    gradients were not saved: true, and of no concern to an artefact that serves predictions."""

    def filter(self, record):
        return "with ops with unsaved custom gradients" not in record.getMessage()


@contextlib.contextmanager
def _without_custom_gradient_notice():
    logger, notice = logging.getLogger("absl"), _CustomGradientNotice()
    logger.addFilter(notice)
    try:
        yield
    finally:
        logger.removeFilter(notice)


def load_artefact(path, format):
    """Loads an exported artefact in its own runtime.

    Args:
        path: what `export` returned (or another one-input, one-output
            artefact of the format, such as one from an earlier version).
        format: the format it was written in.

    Returns:
        A function from a NumPy batch of images to the NumPy values of the
        artefact's one output (`outputs`).
    """
    validation.one_of("format", format, FORMATS)
    extras.check(RUNTIME_MODULES[format], needed_for=f"running a {format} artefact", extra="deploy")
    if format == "saved_model":
        import tensorflow as tf

        with _without_custom_gradient_notice():
            loaded = tf.saved_model.load(path)  # kept alive: `serve` refers to its variables

        def run(images):
            outputs = loaded.serve(tf.constant(images))
            return (outputs[OUTPUT_NAME] if isinstance(outputs, dict) else outputs).numpy()

        return run
    if format == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        return lambda images: session.run(None, {name: images})[0]
    if format == "litert":
        from ai_edge_litert.interpreter import Interpreter

        signature = Interpreter(model_path=path).get_signature_runner()
        name = next(iter(signature.get_input_details()))
        return lambda images: next(iter(signature(**{name: images}).values()))
    import openvino as ov

    # float32 as exported: on a CPU with native bfloat16 (AVX-512 BF16, AMX) OpenVINO otherwise computes in bfloat16
    # (a tiny ViT's outputs off by up to 4e-3 on an Intel Xeon with AVX-512 BF16).
    compiled = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return lambda images: compiled(images)[0]


def artefact_class_names(path, format):
    """The class names stored with an exported artefact, or `None`.

    Args:
        path: what `export` returned.
        format: the format it was written in.

    Returns:
        A list of str, or `None` when the artefact has none. OpenVINO keeps
        them space-separated, so a space inside a name comes back as `_`.
    """
    validation.one_of("format", format, FORMATS)
    if format == "onnx":
        import onnx

        stored = {entry.key: entry.value for entry in onnx.load(path, load_external_data=False).metadata_props}
        return json.loads(stored["class_names"]) if "class_names" in stored else None
    if format == "openvino":
        import openvino as ov

        ov_model, key = ov.Core().read_model(path), ["model_info", "labels"]
        return ov_model.get_rt_info(key).astype(str).split() if ov_model.has_rt_info(key) else None
    names_file = os.path.join(path, "assets.extra", CLASS_NAMES_FILE) if format == "saved_model" else None
    names_file = names_file or writers.class_names_path(path)
    if not os.path.isfile(names_file):
        return None
    with open(names_file) as handle:
        return json.load(handle)
