"""The frozen representation of a keras_vit model, streamed from a data source.

The paper's few-shot and linear evaluations read one vector per image from a
pre-trained ViT: the `pre_logits` layer where the checkpoint has one (the
original ImageNet-21k models), else the pooled tokens after the final norm:
the class token, or the mean of the patch tokens for a gap-pooled model. A
ViT without pooling (`include_top=False, pooling=None`) gives its class token
after the final norm.

`extract_features` streams any `keras_vit.training.data` source (an image folder,
`tfds:NAME`, `from_arrays`) through `eval_pipeline` batch by batch, so only
one batch of images is ever in memory, and keeps only the features (and, on
request, the model's own outputs, for a held-out report of its head). The
result can be cached in a `.npz` file, written atomically and keyed by the
weights, the representation, the image size and what the split holds (its
files, arrays or TFDS version: `SourceInfo.fingerprint`), so a second
evaluation of the same model on the same split skips the model.

Example:

```python
train = keras_vit.training.data.load("path/to/images", "train")
features = keras_vit.evaluation.extract_features(model, train)
features.features.shape  # (num_images, feature_dim)
```
"""

import dataclasses

import keras
import numpy as np

from keras_vit.models import metadata, preprocessing
from keras_vit.utils import validation

REPRESENTATIONS = ("pre_logits", "token", "gap", "max")


@dataclasses.dataclass(frozen=True)
class Representation:
    """How a model's representation is read.

    Attributes:
        model: a `keras.Model` from the ViT's images to the representation
            (or to the token sequence, see `from_sequence`), with the
            classifier's outputs as a second output when they were asked for
            and come from the same graph.
        kind: `"pre_logits"`, `"token"`, `"gap"` or `"max"`.
        from_sequence: bool, the model returns the token sequence after the
            final norm and `kind` is taken from it (a ViT without pooling).
        image_size: `(height, width)` the images are resized to.
        scale_pixels: bool, the ViT has no pixel scaling of its own
            (`include_preprocessing=False`): [0, 255] pixels are scaled to
            [-1, 1] before it.
        classifier: the user's model holding the ViT, run for its outputs
            when they are not in the ViT's graph, or None.
        channels_first: bool, the model takes channels-first images: the
            pipeline's channels-last batches are transposed for it.
    """

    model: object
    kind: str
    from_sequence: bool
    image_size: tuple
    scale_pixels: bool
    classifier: object = None
    channels_first: bool = False

    def __call__(self, images):
        """`(features (batch, dim), outputs or None)` of a batch of channels-last [0, 255] images, as float32."""
        if self.channels_first:
            images = np.transpose(images, (0, 3, 1, 2))
        pixels = images
        if self.scale_pixels:
            pixels = np.asarray(images, dtype="float32") * np.float32(preprocessing.SCALE) + np.float32(
                preprocessing.OFFSET
            )
        results = self.model.predict_on_batch(pixels)
        features, outputs = results if isinstance(results, (list, tuple)) else (results, None)
        if self.classifier is not None:
            outputs = self.classifier.predict_on_batch(images)
        features = np.asarray(keras.ops.convert_to_numpy(features), dtype="float32")
        if self.from_sequence:
            features = features[:, 0] if self.kind == "token" else features[:, 1:].mean(axis=1)
        if outputs is not None:
            outputs = np.asarray(keras.ops.convert_to_numpy(outputs), dtype="float32")
        return features, outputs


def find_backbone(model):
    """The keras_vit ViT inside `model` (the model itself, or one nested in it at any depth).

    Raises:
        ValueError: `model` holds no keras_vit ViT.
    """
    if not isinstance(model, keras.Model):
        raise ValueError(
            f"Expected a keras.Model holding a keras_vit ViT. Received: an object of type {type(model).__name__}"
        )
    return metadata.find_vit(model)


def _spatial_size(input_shape, channels_first):
    """`(height, width)` of a model's `input_shape` (batch included) in its data format."""
    return tuple(input_shape[2:4] if channels_first else input_shape[1:3])


def has_head(model, num_classes):
    """Whether `model`'s output is one score per class of `num_classes` classes."""
    shape = model.output_shape if len(model.outputs) == 1 else None
    return shape is not None and len(shape) == 2 and shape[-1] == num_classes


def representation(model, image_size=None, num_classes=None):
    """The paper's representation of `model`: what `extract_features` reads.

    Args:
        model: a keras_vit model, or a user's model with one nested in it.
        image_size: optional int or `(height, width)`; defaults to the ViT's
            input size (or, for a ViT that takes any size, the size of its
            stored position-embedding grid).
        num_classes: optional int: when `model`'s output has one score per
            class, the `Representation` also returns those outputs.

    Returns:
        A `Representation`.

    Raises:
        ValueError: `model` holds no keras_vit ViT.
    """
    backbone = find_backbone(model)
    if backbone.representation_size is not None:
        kind, tensor, from_sequence = "pre_logits", backbone.get_layer("pre_logits").output, False
    elif backbone.pooling is not None:
        kind, tensor, from_sequence = backbone.pooling, backbone.get_layer("pooling").output, False
    else:
        kind, tensor, from_sequence = "token", backbone.get_layer("encoder_norm").output, True
    channels_first = backbone.channels_first
    # A ViT that takes any size is fed the size of its stored position-embedding grid.
    size = backbone.default_image_size if image_size is None else validation.pair("image_size", image_size)
    size = tuple(int(side) for side in size)
    scale = not backbone.include_preprocessing
    outputs, classifier = tensor, None
    if num_classes is not None and has_head(model, num_classes):
        if backbone is model:
            outputs = [tensor, model.outputs[0]]  # one pass gives both
        elif _spatial_size(model.input_shape, channels_first) in (size, (None, None)):
            classifier = model  # the ViT is nested: its tensors are not in the outer graph
    # One input stays a tensor, not a one-element list: batches are passed as a tensor.
    inputs = backbone.inputs[0] if len(backbone.inputs) == 1 else backbone.inputs
    feature_model = keras.Model(inputs, outputs, name=f"{backbone.name}_{kind}")
    return Representation(feature_model, kind, from_sequence, size, scale, classifier, channels_first)
