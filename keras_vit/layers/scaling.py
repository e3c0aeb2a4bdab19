"""The pixel scaling at the front of a ViT, as one `torch.compile` graph with the rest of the model."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_vit")
class PixelScaling(keras.layers.Rescaling):
    """`keras.layers.Rescaling` computed with `keras.ops`: `inputs * scale + offset` in the compute dtype.

    The same arithmetic, arguments and config as Keras's `Rescaling` (it is
    one: `isinstance(layer, keras.layers.Rescaling)` holds), for use inside
    a model. Keras's own layer reaches its ops through a backend chosen at
    call time (so that it can also run inside `tf.data` on any backend), an
    import that `torch.compile` cannot trace (nor its question to TensorFlow,
    where imported, whether it runs inside `tf.data`): on the torch backend a model
    that starts with it breaks into pieces at every call, the pieces
    recompile until torch's limit, and the model runs eagerly (a ViT-B/16
    "compiled" through `jit_compile=True` inferred no faster than eager on a
    GPU). This layer compiles into the model's one graph.

    Args:
        scale: float, or a per-channel vector, the multiplier.
        offset: float, or a per-channel vector, added after scaling.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Example:

    >>> import numpy as np
    >>> layer = PixelScaling(1 / 127.5, offset=-1.0)
    >>> np.asarray(layer(np.array([[0.0, 127.5, 255.0]])))
    array([[-1.,  0.,  1.]], dtype=float32)
    """

    def __call__(self, inputs, **kwargs):
        if keras.backend.backend() == "tensorflow":
            return super().__call__(inputs, **kwargs)
        # Keras's data-layer call asks TensorFlow, wherever it is imported (tf.data input pipelines), whether it
        # runs inside tf.data, on every call: a call torch.compile cannot trace either. Inside a JAX or torch model
        # it never does; the plain layer call follows.
        return keras.layers.Layer.__call__(self, inputs, **kwargs)

    def call(self, inputs):
        dtype = self.compute_dtype
        scale = ops.cast(self.scale, dtype)
        offset = ops.cast(self.offset, dtype)
        if len(scale.shape) > 0 and keras.config.image_data_format() == "channels_first":
            # A per-channel vector broadcasts over (channels, height, width).
            scale = ops.reshape(scale, tuple(scale.shape) + (1,) * (3 - len(scale.shape)))
        return ops.cast(inputs, dtype) * scale + offset
