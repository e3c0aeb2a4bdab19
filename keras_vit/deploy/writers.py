"""Write one serving artefact, with one input `images` (a NaFlex model: its dict's) and one output `outputs`, into a
staging folder.

On TensorFlow and JAX, SavedModel, LiteRT and OpenVINO convert one Keras `ExportArchive` returning `{"outputs": ...}`
(converting Keras's traced function made every unused shape slice an output); ONNX, and OpenVINO on torch, go through
Keras's own export and have their tensors renamed.
"""

import json
import os

import keras
import numpy as np

from keras_vit.utils import extras, files

INPUT_NAME = "images"
OUTPUT_NAME = "outputs"
CLASS_NAMES_FILE = "class_names.json"


def class_names_path(path, format):
    """Where the class names of a SavedModel or LiteRT artefact are: `vit.tflite` -> `vit.class_names.json`."""
    if format == "saved_model":
        return os.path.join(path, "assets.extra", CLASS_NAMES_FILE)  # TF Serving's place for files beside a model
    return os.path.splitext(os.fspath(path))[0] + "." + CLASS_NAMES_FILE


def write(serving, format, staged, class_names=None, int8=False, verbose=False):
    """Writes `serving` as a `format` artefact at `staged`, in a staging folder it may use as scratch space."""
    scratch = staged + ".scratch"
    os.mkdir(scratch)
    if format == "saved_model":
        _archive(serving).write_out(staged, verbose=verbose)
    elif format == "litert":
        _write_litert(serving, staged, scratch, int8)
    elif format == "onnx":
        _write_onnx(serving, staged, scratch, class_names, int8, verbose)
    else:
        _write_openvino(serving, staged, scratch, class_names, verbose)
    if class_names is not None and format in ("saved_model", "litert"):
        files.write_json(class_names_path(staged, format), class_names, indent=None)


def serving_inputs(serving):
    """The artefact's inputs by name: `images`, or a NaFlex model's own (`patches`, `spatial_shapes`, `mask`)."""
    return dict(serving.input) if isinstance(serving.input, dict) else {INPUT_NAME: serving.inputs[0]}


def _archive(serving):
    archive = keras.export.ExportArchive()
    archive.track(serving)
    inputs = serving_inputs(serving)
    specs = {name: keras.InputSpec(shape=x.shape, dtype=x.dtype, name=name) for name, x in inputs.items()}

    def serve(inputs):
        return {OUTPUT_NAME: serving(inputs, training=False)}

    naflex = isinstance(serving.input, dict)
    archive.add_endpoint("serve", serve, input_signature=[specs if naflex else specs[INPUT_NAME]])
    return archive


def _saved_model(serving, scratch):
    path = os.path.join(scratch, "saved_model")
    _archive(serving).write_out(path, verbose=False)
    return path


def _write_litert(serving, staged, scratch, int8):
    import tensorflow as tf

    # The settings of Keras's own LiteRT export (TFLite builtins, TF ops where none fits).
    converter = tf.lite.TFLiteConverter.from_saved_model(_saved_model(serving, scratch))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
    converter.experimental_enable_resource_variables = True
    if int8:
        # Dynamic-range quantization: int8 weights, XNNPACK quantizes the activations per call.
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    with open(staged, "wb") as handle:
        handle.write(converter.convert())


def _write_onnx(serving, staged, scratch, class_names, int8, verbose):
    import onnx

    traced = os.path.join(scratch, "float32.onnx")
    if keras.backend.backend() == "tensorflow":
        _register_erfc_for_tf2onnx()
    serving.export(traced, format="onnx", verbose=verbose)
    if int8:
        traced = quantize_onnx_int8(traced, os.path.join(scratch, "int8.onnx"))
    proto = onnx.load(traced)
    (outputs,) = proto.graph.output
    if not isinstance(serving.input, dict):  # a NaFlex model's inputs keep the names Keras gives them, its own
        (images,) = proto.graph.input
        _rename_onnx_tensor(proto.graph, images.name, INPUT_NAME)
    _rename_onnx_tensor(proto.graph, outputs.name, OUTPUT_NAME)
    if class_names is not None:
        entry = proto.metadata_props.add()
        entry.key, entry.value = "class_names", json.dumps(list(class_names))
    onnx.save(proto, staged)


def _rename_onnx_tensor(graph, old, new):
    for value in [*graph.input, *graph.output]:
        if value.name == old:
            value.name = new
    for node in graph.node:
        node.input[:] = [new if name == old else name for name in node.input]
        node.output[:] = [new if name == old else name for name in node.output]


def _write_openvino(serving, staged, scratch, class_names, verbose):
    import openvino as ov

    if keras.backend.backend() == "torch":
        traced = os.path.join(scratch, "traced.xml")
        serving.export(traced, format="openvino", verbose=verbose)
        ov_model = ov.Core().read_model(traced)
    else:
        ov_model = ov.convert_model(_saved_model(serving, scratch))
    (outputs,) = ov_model.outputs
    outputs.get_tensor().set_names({OUTPUT_NAME})
    if not isinstance(serving.input, dict):  # a NaFlex model's inputs keep the names Keras gives them, its own
        (images,) = ov_model.inputs
        images.get_tensor().set_names({INPUT_NAME})
    # Torch's trace leaves every dimension dynamic: the image size (NaFlex: the length) is fixed, a wrong one refused.
    sizes = {
        name: ov.PartialShape([-1 if size is None else size for size in x.shape])
        for name, x in serving_inputs(serving).items()
    }
    if any(port.get_partial_shape() != sizes[port.get_any_name()] for port in ov_model.inputs):
        ov_model.reshape(sizes)
    if class_names is not None:
        # OpenVINO's own place for a classifier's labels, space-separated.
        ov_model.set_rt_info(" ".join(name.replace(" ", "_") for name in class_names), ["model_info", "labels"])
    ov.save_model(ov_model, staged, compress_to_fp16=False)


def _register_erfc_for_tf2onnx():
    """TensorFlow's exact GELU uses `Erfc`, which tf2onnx does not convert: it becomes `1 - Erf`."""
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


def quantize_onnx_int8(path, out):
    """Writes `out` (new), the ONNX file `path` with ONNX Runtime's dynamic int8 quantization of every MatMul."""
    extras.check("onnxruntime", needed_for="ONNX int8 quantization", extra="deploy")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out = os.fspath(out)
    with files.atomic_file(out, replace=False) as staged:
        quantize_dynamic(path, staged, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"])
    return out
