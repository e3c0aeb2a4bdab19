"""The Glorot-uniform initializer of the transformer's kernels."""

import math

import keras

from keras_vit.utils import keras_compat


def _fans(shape):
    """`(fan_in, fan_out)` of a kernel as Keras counts them."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive_field = math.prod(shape[:-2])
    return shape[-2] * receptive_field, shape[-1] * receptive_field


@keras.saving.register_keras_serializable(package="keras_vit")
class GlorotUniform(keras.initializers.GlorotUniform):
    """`keras.initializers.GlorotUniform`, the same values, drawn without kernel-sized temporaries on torch.

    Example:

    >>> layer = keras.layers.Dense(3, kernel_initializer=GlorotUniform(seed=1))
    >>> layer.build((None, 4))
    >>> tuple(layer.kernel.shape)
    (4, 3)
    """

    def __call__(self, shape, dtype=None):
        if keras.backend.backend() != "torch":
            return super().__call__(shape, dtype=dtype)
        fan_in, fan_out = _fans(shape)
        # Keras's arithmetic, operation for operation (VarianceScaling, mode "fan_avg", distribution "uniform").
        scale = self.scale / max(1.0, (fan_in + fan_out) / 2.0)
        limit = math.sqrt(3.0 * scale)
        return keras_compat.uniform(shape, minval=-limit, maxval=limit, dtype=dtype, seed=self.seed)
