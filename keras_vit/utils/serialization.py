"""Registration under the `keras_vit` package, and the entries of a layer's config."""

import inspect
import re

import keras

from keras_vit.utils import keras_compat

# The class decorator that names a class `keras_vit>ClassName`: `load_model` revives it after `import keras_vit`.
register = keras.saving.register_keras_serializable(package="keras_vit")


def arguments(layer):
    """The config entries of `layer`'s constructor arguments (`**kwargs` aside), read from its attributes."""
    parameters = inspect.signature(type(layer).__init__).parameters
    return {name: getattr(layer, name) for name in parameters if name not in ("self", "kwargs")}


def dtype_config(layer):
    """The `dtype` entry of a composite layer's config, its quantized sublayers' policies included.

    The sublayers are revived with the composite's policy, so quantized ones travel in a `DTypePolicyMap` (as in
    keras-hub), keyed by `.*/<path below the layer>` to hold when the model is nested or renamed.

    >>> dtype_config(keras.layers.Dense(2))["config"]["name"]
    'float32'
    """
    policy = layer.dtype_policy
    if isinstance(policy, keras.dtype_policies.DTypePolicyMap):
        # A revived layer: rebuilt from its entries, since the map keeps the raw dict it was loaded from.
        default, quantized = policy.default_policy, {key: policy[key] for key in policy}
    else:
        default, quantized, prefix = policy, {}, f"{layer.path}/"
        for sublayer in keras_compat.sublayers(layer):
            if sublayer.quantization_mode is not None and sublayer.path.startswith(prefix):
                quantized[".*/" + re.escape(sublayer.path[len(prefix) :])] = sublayer.dtype_policy
    if quantized:
        policy = keras.dtype_policies.DTypePolicyMap(default_policy=default, policy_map=quantized)
    return keras.dtype_policies.serialize(policy)
