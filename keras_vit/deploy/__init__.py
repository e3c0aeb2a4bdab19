"""Serving artefacts: export a keras_vit model and run what was exported.

`export` writes a TensorFlow SavedModel, ONNX, LiteRT or OpenVINO artefact
(`keras_vit.deploy.artefacts`); `load_artefact` runs one in its own
runtime. See the `artefacts` module's documentation for which backend writes
which format.
"""

from keras_vit.deploy.artefacts import (
    CLASS_NAMES_FILE,
    FORMATS,
    INPUT_DTYPES,
    INT8_FORMATS,
    UNSUPPORTED,
    artefact_path,
    export,
    load_artefact,
    quantize_onnx_int8,
    serving_model,
    supported,
)

__all__ = [
    "CLASS_NAMES_FILE",
    "FORMATS",
    "INPUT_DTYPES",
    "INT8_FORMATS",
    "UNSUPPORTED",
    "artefact_path",
    "export",
    "load_artefact",
    "quantize_onnx_int8",
    "serving_model",
    "supported",
]
