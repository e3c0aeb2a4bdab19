"""What a saved classifier says about itself: its class names, and where its ViT is.

A `.keras` file keeps layers and their configs, nothing else, so the class
names travel in a layer: `ClassNames`, an identity layer on the classifier's
output whose config is the list of names. It is registered, so the names
survive `keras.saving.load_model(..., safe_mode=True)` on every backend, and
it computes nothing, so exported graphs are unchanged. `class_names(model)`
reads them back from the model or any model nested in it.

`find_vit(model)` finds the keras_vit backbone inside a user's model (a
`Sequential([vit, Dense(...)])`, a functional model around it, or the ViT
itself), which is what the `predict`, `inspect` and `convert` commands work on.

Example:

>>> import keras_vit
>>> vit = keras_vit.VisionTransformer(patch_size=8, hidden_dim=16, num_layers=1,
...     num_heads=2, mlp_dim=32, input_shape=(16, 16, 3), classes=2)
>>> model = with_class_names(vit, ["cat", "dog"])
>>> class_names(model)
('cat', 'dog')
>>> find_vit(model) is model
True
"""

import keras

from keras_vit import layers as vit_layers
from keras_vit.serialization import register

__all__ = ["ClassNames", "class_names", "find_vit", "with_class_names"]


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
    """Returns a functional model with `model`'s inputs, outputs and weights
    plus a `ClassNames` layer on its output.

    Args:
        model: a single-output `keras.Model` built on `keras.Input`s (the
            keras_vit constructors build such models).
        names: the class names, one per output unit.

    Returns:
        A `keras.Model` sharing `model`'s layers (and so its weights).
    """
    if len(model.outputs) != 1:
        raise ValueError(f"`model` must have one output. Received: {len(model.outputs)} outputs")
    outputs = ClassNames(names, name="class_names")(model.outputs[0])
    return keras.Model(model.inputs, outputs, name=model.name)


def find_vit(model):
    """The model holding the ViT's embedding layers and transformer blocks.

    Args:
        model: a `keras.Model`: a keras_vit model, or a user's model with one
            nested in it (at any depth).

    Returns:
        `model` itself when its own layers are the ViT's, else the nested
        model that holds them.

    Raises:
        ValueError: no model inside `model` holds `TransformerBlock` layers.
    """
    for layer in _all_layers(model):
        if any(isinstance(inner, vit_layers.TransformerBlock) for inner in getattr(layer, "layers", ())):
            return layer
    raise ValueError(
        f"Model {model.name!r} holds no keras_vit Vision Transformer (no TransformerBlock layers, "
        "nested or not). Pass a model built with keras_vit."
    )
