"""The Glorot-uniform initializer of the transformer's kernels."""

import math

import keras

from keras_vit.utils import keras_compat


@keras.saving.register_keras_serializable(package="keras_vit")
class GlorotUniform(keras.initializers.GlorotUniform):
    """`keras.initializers.GlorotUniform`, the same values, drawn without kernel-sized temporaries on torch.

    Example:

    >>> keras.ops.shape(GlorotUniform(seed=1)((4, 3)))
    (4, 3)
    """

    def __call__(self, shape, dtype=None):
        if keras.backend.backend() != "torch" or len(shape) != 2:
            return super().__call__(shape, dtype=dtype)
        fan_in, fan_out = shape
        # Keras's arithmetic, operation for operation (VarianceScaling, mode "fan_avg", distribution "uniform").
        scale = self.scale / max(1.0, (fan_in + fan_out) / 2.0)
        limit = math.sqrt(3.0 * scale)
        return keras_compat.uniform(shape, minval=-limit, maxval=limit, dtype=dtype, seed=self.seed)
