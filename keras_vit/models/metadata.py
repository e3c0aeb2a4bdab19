"""What a saved classifier says about itself: its class names (in `ClassNames`, an identity layer whose config
is the list of names), and where its ViT is (`find_vit`)."""

import os
import zipfile

import keras
import numpy as np

from keras_vit.models.vit import find_layer, find_vit
from keras_vit.utils.serialization import register

__all__ = ["ClassNames", "class_names", "find_vit", "load_classifier", "top_classes", "with_class_names"]


@register
class ClassNames(keras.layers.Layer):
    """An identity layer that records the class names of its input's last axis.

    Args:
        class_names: a non-empty sequence of distinct strings, in label order.
        **kwargs: base layer arguments; the dtype defaults to float32 so that the float32 logits are not cast.
    """

    def __init__(self, class_names, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        names = () if isinstance(class_names, str) else tuple(class_names)
        if not names or not all(isinstance(name, str) for name in names) or len(set(names)) != len(names):
            raise ValueError(
                f"`class_names` must be a non-empty sequence of distinct strings. Received: class_names={class_names!r}"
            )
        self.class_names = names

    def build(self, input_shape):
        if input_shape[-1] is not None and input_shape[-1] != len(self.class_names):
            raise ValueError(
                f"ClassNames has {len(self.class_names)} names but its input has {input_shape[-1]} classes. "
                f"Received: input_shape={input_shape}"
            )

    def call(self, inputs):
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "class_names": list(self.class_names)}


def class_names(model):
    """The class names saved with `model` or a model nested in it (a tuple of str), or None."""
    layer = find_layer(model, ClassNames)
    return None if layer is None else layer.class_names


def with_class_names(model, names):
    """A functional model that calls the single-input (or NaFlex dict input), single-output `model` and records
    `names` on its output."""
    naflex = isinstance(model.input, dict)
    if (len(model.inputs) != 1 and not naflex) or len(model.outputs) != 1:
        raise ValueError(
            f"`model` must have one input and one output. Received: {len(model.inputs)} inputs, "
            f"{len(model.outputs)} outputs"
        )
    if naflex:
        inputs = {key: keras.Input(shape=x.shape[1:], dtype=x.dtype, name=key) for key, x in model.input.items()}
    else:
        inputs = keras.Input(shape=model.inputs[0].shape[1:], dtype=model.inputs[0].dtype, name="images")
    outputs = ClassNames(names, name="class_names")(model(inputs))
    return keras.Model(inputs, outputs, name=f"{model.name}_classifier")


def load_classifier(path):
    """Loads a `.keras` file that holds a keras_vit ViT (nested or not) with `safe_mode=True`."""
    if not str(path).endswith(".keras"):
        raise ValueError(f"A saved model must be a .keras file. Received: {path!r}")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No saved model at {path!r}.")
    if not zipfile.is_zipfile(path):
        # Keras reports any file it cannot open as a zip as "File not found", which misleads here.
        raise ValueError(
            f"{path!r} is not a readable .keras file: a .keras save is a zip archive, and this one is truncated, "
            "damaged or not a Keras save. Save or copy the model again."
        )
    # Not its training compile: one from another backend can be refused here (torch: steps_per_execution > 1).
    model = keras.saving.load_model(path, compile=False, safe_mode=True)
    find_vit(model)
    return model


def top_classes(model, outputs, top=5):
    """The `top` `(name, probability)` pairs of each row of `outputs`, best first.

    Rows that are not probability distributions (a logits model) go through a softmax; a model without saved
    names gives `"class <index>"`.
    """
    outputs = np.asarray(outputs, dtype="float64")
    if not (np.all(outputs >= 0) and np.allclose(outputs.sum(axis=-1), 1.0, atol=1e-3)):
        shifted = np.exp(outputs - outputs.max(axis=-1, keepdims=True))
        outputs = shifted / shifted.sum(axis=-1, keepdims=True)
    names = class_names(model) or tuple(f"class {index}" for index in range(outputs.shape[-1]))
    rows = []
    for row in outputs:
        order = np.argsort(-row, kind="stable")[:top]
        rows.append([(names[index], float(row[index])) for index in order])
    return rows
