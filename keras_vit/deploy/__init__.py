"""Serving artefacts: export a keras_vit model and run what was exported.

`export` writes a TensorFlow SavedModel, ONNX, LiteRT or OpenVINO artefact
with one input `images` and one output `outputs`; `load_artefact` runs one in
its own runtime and `artefact_class_names` reads the class names stored with
it.
"""

from keras_vit.deploy.artefacts import (
    FORMATS,
    INPUT_DTYPES,
    INT8_FORMATS,
    UNSUPPORTED,
    artefact_class_names,
    artefact_files,
    artefact_path,
    check_target,
    export,
    load_artefact,
    serving_model,
    supported,
)
from keras_vit.deploy.writers import CLASS_NAMES_FILE, INPUT_NAME, OUTPUT_NAME, quantize_onnx_int8

__all__ = [
    "CLASS_NAMES_FILE",
    "FORMATS",
    "INPUT_DTYPES",
    "INPUT_NAME",
    "INT8_FORMATS",
    "OUTPUT_NAME",
    "UNSUPPORTED",
    "artefact_class_names",
    "artefact_files",
    "artefact_path",
    "check_target",
    "export",
    "load_artefact",
    "quantize_onnx_int8",
    "serving_model",
    "supported",
]
