"""The one registration decorator for keras_vit's serializable objects.

Every layer, schedule, loss and optimizer of the package registers under the
package name `keras_vit`, so saved configs read `keras_vit>ClassName` and
`keras.saving.load_model` revives them after a plain `import keras_vit`.
"""

import re

import keras

from keras_vit.utils import keras_compat

PACKAGE = "keras_vit"


def register(cls):
    """Registers `cls` with Keras under the `keras_vit` package name."""
    return keras.saving.register_keras_serializable(package=PACKAGE)(cls)


def dtype_config(layer):
    """The `dtype` entry of a composite layer's config, quantized sublayers included.

    Keras revives each layer of a functional model from its own config, so the
    Dense layers a composite layer builds inside itself come back with the
    composite's policy. After `model.quantize(mode)` that loses their
    quantized policies, and the saved weights (kernel and scale) no longer fit
    them. Here the quantized sublayers' policies go into the config as a
    `keras.dtype_policies.DTypePolicyMap`, which the composite passes on to its
    sublayers (`dtype=self.dtype_policy`), as keras-hub's backbones do. The
    keys are `.*/<path below the layer>` patterns, so the map still applies
    when the model is nested in another model or renamed.

    Args:
        layer: a built `keras.layers.Layer`.

    Returns:
        The serialized dtype policy for `config["dtype"]`.

    Example:

    >>> layer = keras.layers.Dense(2)
    >>> dtype_config(layer)["config"]["name"]
    'float32'
    """
    policy = layer.dtype_policy
    if isinstance(policy, keras.dtype_policies.DTypePolicyMap):
        # A revived layer: rebuilt from its entries, because the map keeps the
        # raw default-policy dict it was loaded from (with the file's
        # shared-object ids), which would make the config differ.
        default, quantized = policy.default_policy, {key: policy[key] for key in policy}
    else:
        default, quantized, prefix = policy, {}, f"{layer.path}/"
        for sublayer in keras_compat.sublayers(layer):
            if sublayer.quantization_mode is not None and sublayer.path.startswith(prefix):
                quantized[".*/" + re.escape(sublayer.path[len(prefix) :])] = sublayer.dtype_policy
    if quantized:
        policy = keras.dtype_policies.DTypePolicyMap(default_policy=default, policy_map=quantized)
    return keras.dtype_policies.serialize(policy)
