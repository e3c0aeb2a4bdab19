"""Export a keras_vit model as a serving artefact, and run the artefact.

`export(model_or_path, out, format)` writes a TensorFlow SavedModel, an ONNX
file, a LiteRT (`.tflite`) flatbuffer or an OpenVINO IR (`.xml` + `.bin`)
through Keras's own `Model.export`. The artefact takes what a serving client
has, a batch of RGB images with pixels in [0, 255] (`uint8` by default,
`float32` on request), channels last; the ViT scaling to [-1, 1] is inside
it. The batch size is dynamic; the resolution is the model's (fixed).

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

import json
import os
import shutil
import tempfile

import keras
import numpy as np

from keras_vit.models import metadata
from keras_vit.utils import files, validation

FORMATS = ("saved_model", "onnx", "litert", "openvino")
INPUT_DTYPES = ("uint8", "float32")
_KERAS_FORMATS = {"saved_model": "tf_saved_model", "onnx": "onnx", "litert": "litert", "openvino": "openvino"}
# The backends on which Keras 3.15 writes each format, and why not elsewhere.
UNSUPPORTED = {
    ("onnx", "jax"): "Keras 3.15 exports ONNX from JAX through the `jax2onnx` package, which pulls in flax, orbax "
    "and tensorstore; keras_vit does not pin it",
    ("saved_model", "torch"): "Keras exports a SavedModel from the TensorFlow and JAX backends only",
    ("onnx", "torch"): "Keras 3.15's torch ONNX export fails on the attention's shape arithmetic "
    "(torch.onnx SymbolicValueError on a Gather in keras.ops.dot_product_attention)",
    ("openvino", "jax"): "OpenVINO cannot convert the XlaCallModule op that JAX's TensorFlow bridge emits",
    ("litert", "jax"): "Keras exports LiteRT from the TensorFlow backend (and torch with litert-torch) only",
    ("litert", "torch"): "Keras exports LiteRT from torch through the separate `litert-torch` package, "
    "which keras_vit does not pin",
}
CLASS_NAMES_FILE = "class_names.json"
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


def artefact_path(out, format):
    """The file or folder `export` writes for `format` under the name `out`:
    `out` itself for a SavedModel, else `out` with the format's suffix."""
    suffix = {"saved_model": "", "onnx": ".onnx", "litert": ".tflite", "openvino": ".xml"}[format]
    return out if not suffix or out.endswith(suffix) else out + suffix


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
    shape = tuple(model.input_shape[1:])
    if len(shape) != 3 or None in shape:
        raise ValueError(
            "The model to export must take images of a fixed (height, width, channels). "
            f"Received: input_shape={model.input_shape}"
        )
    inputs = keras.Input(shape=shape, dtype=input_dtype, name="images")
    # Rescaling casts to float32 first: x / 127.5 - 1, the ViT preprocessing, unless the ViT
    # scales raw pixels itself (include_preprocessing=True, the default): then only the cast. The
    # ViT may be nested in the user's model, so its own layers are the ones that say.
    own_scaling = any(isinstance(layer, keras.layers.Rescaling) for layer in metadata.find_vit(model).layers)
    scale, offset = (1.0, 0.0) if own_scaling else (1.0 / 127.5, -1.0)
    scaled = keras.layers.Rescaling(scale, offset=offset, name="pixel_scaling")(inputs)
    serving = keras.Model(inputs, model(scaled), name=f"{model.name}_serving")
    # Keras exports only models that have run once (it traces their call).
    serving(np.zeros((1, *shape), input_dtype))
    return serving


def _register_erfc_for_tf2onnx():
    """TensorFlow computes exact GELU with `Erfc`, which ONNX lacks and
    tf2onnx 1.17 does not convert; it is `1 - Erf`, and ONNX has `Erf`."""
    from tf2onnx import utils as tf2onnx_utils
    from tf2onnx.handler import tf_op

    @tf_op("Erfc")
    class Erfc:
        @classmethod
        def version_9(cls, ctx, node, **kwargs):
            node.type = "Erf"
            dtype = ctx.get_dtype(node.input[0])
            one = ctx.make_const(
                tf2onnx_utils.make_name("erfc_one"), np.array(1, tf2onnx_utils.map_onnx_to_numpy_type(dtype))
            )
            output = node.output[0]
            sub = ctx.insert_new_node_on_output(
                "Sub", output, name=tf2onnx_utils.make_name(node.name), inputs=[one.output[0], output]
            )
            ctx.copy_shape(output, sub.output[0])
            ctx.set_dtype(sub.output[0], dtype)


def _load(model_or_path):
    if isinstance(model_or_path, keras.Model):
        return model_or_path
    if isinstance(model_or_path, (str, os.PathLike)) and str(model_or_path).endswith(".keras"):
        return metadata.load_classifier(os.fspath(model_or_path))
    raise ValueError(
        f"`model_or_path` must be a keras.Model or a `.keras` file. Received: model_or_path={model_or_path!r}"
    )


def _write_class_names(path, format, class_names):
    if format == "onnx":
        import onnx

        proto = onnx.load(path)
        entry = proto.metadata_props.add()
        entry.key, entry.value = "class_names", json.dumps(list(class_names))
        onnx.save(proto, path)
    elif format == "openvino":
        import openvino as ov

        ov_model = ov.Core().read_model(path)
        # OpenVINO's own place for a classifier's labels (model_info/labels).
        ov_model.set_rt_info(" ".join(name.replace(" ", "_") for name in class_names), ["model_info", "labels"])
        # A new file pair: the .bin just read is memory-mapped.
        labelled = path[: -len(".xml")] + ".labelled.xml"
        ov.save_model(ov_model, labelled, compress_to_fp16=False)
        del ov_model
        for suffix in (".xml", ".bin"):
            os.replace(labelled[: -len(".xml")] + suffix, path[: -len(".xml")] + suffix)
    else:
        # SavedModel: TF Serving's assets.extra; LiteRT: a file beside the model.
        target = os.path.join(path, "assets.extra") if format == "saved_model" else os.path.dirname(path)
        os.makedirs(target, exist_ok=True)
        with open(os.path.join(target, CLASS_NAMES_FILE), "w") as handle:
            json.dump(list(class_names), handle)


def export(model_or_path, out, format="saved_model", input_dtype="uint8", class_names=None, int8=False, verbose=False):
    """Exports a keras_vit model as a serving artefact.

    Args:
        model_or_path: a `keras.Model` (a constructor's output, a backbone
            inside a user's model...) or the path of a `.keras` file such as
            the `finetune` job's `model.keras`.
        out: the artefact's path; the format's suffix (`.onnx`, `.tflite`,
            `.xml`) is added when missing. It must not exist yet.
        format: one of `"saved_model"`, `"onnx"`, `"litert"`, `"openvino"`.
        input_dtype: `"uint8"` (default) or `"float32"` pixels in [0, 255].
        class_names: optional list of str stored with the artefact (default:
            the names saved in the model, `keras_vit.metadata.class_names`): ONNX
            metadata `class_names` (JSON), OpenVINO `model_info/labels`,
            `assets.extra/class_names.json` in a SavedModel, a
            `class_names.json` beside a `.tflite`.
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
    path = artefact_path(os.fspath(out), format)
    companions = [path[: -len(".xml")] + ".bin"] if format == "openvino" else []
    for existing in [path, *companions]:
        if os.path.exists(existing):
            raise FileExistsError(f"{existing} exists: choose a new path or remove it first.")
    source = _load(model_or_path)
    class_names = metadata.class_names(source) if class_names is None else class_names
    if class_names is not None:
        class_names = [str(name) for name in class_names]
    model = serving_model(source, input_dtype=input_dtype)
    if class_names is not None and model.output_shape[-1] != len(class_names):
        raise ValueError(
            f"`class_names` has {len(class_names)} names but the model has {model.output_shape[-1]} outputs. "
            f"Received: class_names={class_names[:5]}..."
        )
    parent = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(parent, exist_ok=True)
    # Written in a temporary folder beside the target and moved in at the end,
    # so a failed export leaves nothing behind.
    staging = tempfile.mkdtemp(prefix=".export-", dir=parent)
    try:
        staged = os.path.join(staging, os.path.basename(path))
        if format == "onnx" and keras.backend.backend() == "tensorflow":
            _register_erfc_for_tf2onnx()
        if int8 and format == "litert":
            import tensorflow as tf

            model.export(staged, format="litert", verbose=verbose, optimizations=[tf.lite.Optimize.DEFAULT])
        else:
            model.export(staged, format=_KERAS_FORMATS[format], verbose=verbose)
        if int8 and format == "onnx":
            float_path = os.path.join(staging, "float32.onnx")
            os.replace(staged, float_path)
            quantize_onnx_int8(float_path, staged)
        if class_names is not None:
            _write_class_names(staged, format, class_names)
        moves = [(staged, path)]
        if format == "openvino":
            moves.append((staged[: -len(".xml")] + ".bin", companions[0]))
        elif format == "litert" and class_names is not None:
            moves.append((os.path.join(staging, CLASS_NAMES_FILE), os.path.join(parent, CLASS_NAMES_FILE)))
        # The data file first: the .xml (what a user opens) appears last.
        for source, target in reversed(moves):
            os.replace(source, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path


def load_artefact(path, format):
    """Loads an exported artefact in its own runtime.

    Args:
        path: what `export` returned.
        format: the format it was written in.

    Returns:
        A function from a NumPy batch of images to the NumPy outputs.
    """
    validation.one_of("format", format, FORMATS)
    if format == "saved_model":
        import tensorflow as tf

        loaded = tf.saved_model.load(path)  # kept alive: `serve` refers to its variables
        return lambda images: loaded.serve(tf.constant(images)).numpy()
    if format == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        return lambda images: session.run(None, {name: images})[0]
    if format == "litert":
        from ai_edge_litert.interpreter import Interpreter

        interpreter = Interpreter(model_path=path)
        signature = interpreter.get_signature_runner()
        input_name = next(iter(signature.get_input_details()))

        def run(images):
            return next(iter(signature(**{input_name: images}).values()))

        return run
    import openvino as ov

    compiled = ov.Core().compile_model(path, "CPU")
    return lambda images: compiled(images)[0]


def quantize_onnx_int8(path, out):
    """Post-training int8 of an ONNX artefact with ONNX Runtime's dynamic
    quantization: int8 weights (per channel) for every MatMul, activations
    quantized at run time, so no calibration set is needed.

    Args:
        path: an ONNX file written by `export`.
        out: the int8 ONNX file to write (must not exist).

    Returns:
        `out`.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out = os.fspath(out)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No ONNX file at {path!r}.")
    if os.path.exists(out):
        raise FileExistsError(f"{out} exists: choose a new path or remove it first.")
    with files.atomic_file(out) as staged:
        quantize_dynamic(path, staged, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"])
    return out
