"""The pixel scaling at the front of a ViT."""

import keras
import numpy as np
from keras import ops


@keras.saving.register_keras_serializable(package="keras_vit")
class PixelScaling(keras.layers.Rescaling):
    """`keras.layers.Rescaling` (it is one) computed with `keras.ops`, so `torch.compile` traces it into the model.

    Keras's own layer reaches its ops through a backend chosen at call time (so it can run in `tf.data`), which
    breaks a compiled torch model into pieces at every call.

    Args:
        scale: float, or a per-channel vector, the multiplier.
        offset: float, or a per-channel vector, added after scaling.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Example:

    >>> np.asarray(PixelScaling(1 / 127.5, offset=-1.0)(np.array([[0.0, 127.5, 255.0]])))
    array([[-1.,  0.,  1.]], dtype=float32)
    """

    def __init__(self, scale, offset=0.0, **kwargs):
        super().__init__(scale, offset=offset, **kwargs)
        # Tuples beside the config's values: torch.compile breaks the graph at a tensor made from Keras's tracked
        # list (or from a NumPy array).
        self._factors = tuple(_constant(value) for value in (scale, offset))

    def __call__(self, inputs, **kwargs):
        if keras.backend.backend() == "tensorflow":
            return super().__call__(inputs, **kwargs)
        # Keras's data-layer call asks TensorFlow whether it runs inside tf.data: untraceable by torch.compile.
        return keras.layers.Layer.__call__(self, inputs, **kwargs)

    def call(self, inputs):
        dtype = self.compute_dtype
        scale, offset = (ops.cast(value, dtype) for value in self._factors)
        if keras.config.image_data_format() == "channels_first":
            # A per-channel vector (the scale, or the offset of a per-channel mean) broadcasts over (channels,
            # height, width).
            scale, offset = (
                ops.reshape(value, tuple(value.shape) + (1,) * (3 - len(value.shape))) if len(value.shape) else value
                for value in (scale, offset)
            )
        return ops.cast(inputs, dtype) * scale + offset


def _constant(value):
    value = np.asarray(value, "float64")
    return float(value) if value.ndim == 0 else tuple(value.tolist())
