"""Serving artefacts: `export` a keras_vit model as SavedModel, ONNX, LiteRT or OpenVINO, and `load_artefact` it."""

from keras_vit.deploy.artefacts import (
    FORMATS,
    INPUT_DTYPES,
    INT8_FORMATS,
    UNSUPPORTED,
    artefact_class_names,
    artefact_files,
    artefact_path,
    check_arguments,
    check_target,
    export,
    is_naflex,
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
    "check_arguments",
    "check_target",
    "export",
    "is_naflex",
    "load_artefact",
    "quantize_onnx_int8",
    "serving_model",
    "supported",
]
