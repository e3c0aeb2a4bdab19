"""What a saved classifier says about itself: its class names, and where its ViT is.

A `.keras` file keeps layers and their configs, nothing else, so the class
names travel in a layer: `ClassNames`, an identity layer on the classifier's
output whose config is the list of names. It is registered, so the names
survive `keras.saving.load_model(..., safe_mode=True)` on every backend, and
it computes nothing, so exported graphs are unchanged. `class_names(model)`
reads them back from the model or any model nested in it.

`find_vit(model)` (from `keras_vit.models.vit`, re-exported here) finds
the keras_vit backbone inside a user's model (a `Sequential([vit, Dense(...)])`,
a functional model around it, or the ViT itself), which is what the `predict`,
`inspect` and `convert` commands work on.

Example:

>>> import keras_vit
>>> vit = keras_vit.VisionTransformer(patch_size=8, hidden_dim=16, num_layers=1,
...     num_heads=2, mlp_dim=32, input_shape=(16, 16, 3), classes=2)
>>> model = with_class_names(vit, ["cat", "dog"])
>>> class_names(model)
('cat', 'dog')
>>> find_vit(model) is vit
True
"""

import os
import zipfile

import keras
import numpy as np

from keras_vit.models.vit import find_vit
from keras_vit.utils.serialization import register

__all__ = ["ClassNames", "class_names", "find_vit", "load_classifier", "top_classes", "with_class_names"]


@register
class ClassNames(keras.layers.Layer):
    """An identity layer that records the class names of its input's last axis.

    Args:
        class_names: a non-empty sequence of distinct strings, one per output
            class, in label order.
        **kwargs: base layer keyword arguments (`name`, `dtype`). The dtype
            defaults to float32: the layer sits after the float32 head and
            must not cast the logits down under a mixed-precision policy.

    Call arguments:
        inputs: the classifier's outputs `(..., len(class_names))`.

    Returns:
        `inputs`, unchanged.
    """

    def __init__(self, class_names, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        if isinstance(class_names, str) or not hasattr(class_names, "__len__"):
            raise ValueError(f"`class_names` must be a sequence of strings. Received: class_names={class_names!r}")
        names = tuple(class_names)
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
        self.built = True

    def call(self, inputs):
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "class_names": list(self.class_names)}


def _all_layers(model):
    """Every layer of `model` and of the models nested in it, outermost first."""
    pending = [model]
    while pending:
        layer = pending.pop(0)
        yield layer
        pending.extend(getattr(layer, "layers", ()))


def class_names(model):
    """The class names saved with `model` (see `ClassNames`), or `None`.

    Args:
        model: a `keras.Model`, e.g. from `keras.saving.load_model`.

    Returns:
        A tuple of str, or `None` when the model carries no names.
    """
    for layer in _all_layers(model):
        if isinstance(layer, ClassNames):
            return layer.class_names
    return None


def with_class_names(model, names):
    """Returns a functional model that calls `model` and adds a `ClassNames` layer on its output.

    Args:
        model: a single-input, single-output `keras.Model` (a keras_vit
            model, or a user's model around one).
        names: the class names, one per output unit.

    Returns:
        A `keras.Model` holding `model` (and so its weights), which
        `find_vit` finds inside it.
    """
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise ValueError(
            f"`model` must have one input and one output. Received: {len(model.inputs)} inputs, "
            f"{len(model.outputs)} outputs"
        )
    inputs = keras.Input(shape=model.inputs[0].shape[1:], dtype=model.inputs[0].dtype, name="images")
    outputs = ClassNames(names, name="class_names")(model(inputs))
    return keras.Model(inputs, outputs, name=f"{model.name}_classifier")


def load_classifier(path):
    """Loads a `.keras` file that holds a keras_vit ViT (nested or not), safely.

    Args:
        path: the `.keras` file, e.g. `keras-vit finetune`'s `model.keras`.

    Returns:
        The `keras.Model` (`load_model(..., safe_mode=True)`).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a `.keras` file (by name or content), or no keras_vit ViT inside.
    """
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
    model = keras.saving.load_model(path, safe_mode=True)
    find_vit(model)
    return model


def top_classes(model, outputs, top=5):
    """Names and probabilities of the `top` classes of each row of `outputs`.

    Args:
        model: the model that produced `outputs` (for its class names).
        outputs: array `(batch, classes)` of probabilities or logits: rows
            that are not probability distributions go through a softmax
            (`keras-vit finetune` saves logits models).
        top: int, how many classes per row.

    Returns:
        A list per row of `(name, probability)` pairs, best first; the name
        is the saved class name, else `"class <index>"`.
    """
    outputs = np.asarray(outputs, dtype="float64")
    is_distribution = np.all(outputs >= 0) and np.allclose(outputs.sum(axis=-1), 1.0, atol=1e-3)
    if not is_distribution:
        shifted = np.exp(outputs - outputs.max(axis=-1, keepdims=True))
        outputs = shifted / shifted.sum(axis=-1, keepdims=True)
    names = class_names(model) or tuple(f"class {index}" for index in range(outputs.shape[-1]))
    rows = []
    for row in outputs:
        order = np.argsort(-row, kind="stable")[:top]
        rows.append([(names[index], float(row[index])) for index in order])
    return rows
