"""Layer-wise learning-rate decay for fine-tuning (BEiT, Bao et al. 2022; used
by MAE and DeiT III fine-tuning of ViTs).

Block `i` of an `L`-block encoder trains at `decay ** (L - i)` times the
learning rate, the patch embedding, class token and position embedding at
`decay ** (L + 1)`, and the final norm and the head at the full rate: the
layers nearest the input, which hold the most general features, move least.

Keras optimizers have one learning rate, so `LayerwiseSGD` and
`LayerwiseAdamW` scale it per variable in `update_step`, from a mapping of
layer names to multipliers that is part of the optimizer's config (it saves
and reloads with the model). They are subclasses rather than a wrapper so
that every backend takes the same per-variable path: the PyTorch backend
swaps the exact `SGD` / `AdamW` classes for fused implementations that never
call `update_step`, but leaves subclasses alone.
"""

import keras
from keras import ops

from keras_vit.models.vit import find_vit
from keras_vit.utils import keras_compat, serialization


def layer_decay_multipliers(model, decay):
    """The learning-rate multiplier of every layer of a ViT for a decay rate.

    Args:
        model: a `keras_vit.VisionTransformer` (or a model containing one,
            see `keras_vit.models.find_vit`).
        decay: float in (0, 1], the per-block decay (0.65 to 0.75 is usual
            for B/16; 1.0 gives every layer the full rate).

    Returns:
        A dict of layer name to multiplier, for `LayerwiseSGD` /
        `LayerwiseAdamW`.

    Example:

    >>> import keras_vit
    >>> model = keras_vit.VisionTransformer(patch_size=4, hidden_dim=8, num_layers=2,
    ...     num_heads=2, mlp_dim=16, input_shape=(8, 8, 3), classes=2)
    >>> multipliers = layer_decay_multipliers(model, 0.5)
    >>> multipliers["patch_embedding"], multipliers["encoder_block_0"], multipliers["encoder_block_1"]
    (0.125, 0.25, 0.5)
    """
    if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0.0 < decay <= 1.0:
        raise ValueError(f"`decay` must be a number in (0, 1]. Received: decay={decay!r}")
    depth = find_vit(model).num_layers
    embeddings = ("patch_embedding", "class_token", "position_embedding")
    multipliers = {name: float(decay ** (depth + 1)) for name in embeddings}
    multipliers.update({f"encoder_block_{index}": float(decay ** (depth - index)) for index in range(depth)})
    return multipliers


class LayerwiseLearningRate(keras_compat.PerVariableWeightDecay):
    """Mixin for a Keras optimizer: scales the learning rate per variable.

    A variable's multiplier is that of the first component of its path
    (`"encoder_block_3/attention/qkv/kernel"` -> `"encoder_block_3"`, or
    `"vit_b16/encoder_block_3/..."` inside a nested model) found in
    `learning_rate_multipliers`; variables of layers not listed use 1.0.

    Args:
        learning_rate_multipliers: dict of layer name to a positive float,
            e.g. from `layer_decay_multipliers`.
        **kwargs: the base optimizer's arguments.
    """

    def __init__(self, *args, learning_rate_multipliers=None, **kwargs):
        super().__init__(*args, **kwargs)
        multipliers = dict(learning_rate_multipliers or {})
        for name, value in multipliers.items():
            if (
                not isinstance(name, str)
                or isinstance(value, bool)
                or not isinstance(value, (int, float))
                or value <= 0
            ):
                raise ValueError(
                    "`learning_rate_multipliers` must map layer names to positive numbers. "
                    f"Received: {name!r}: {value!r}"
                )
        self.learning_rate_multipliers = {name: float(value) for name, value in multipliers.items()}

    def multiplier_for(self, path):
        """The multiplier of a variable with this `path`."""
        for component in path.split("/"):
            if component in self.learning_rate_multipliers:
                return self.learning_rate_multipliers[component]
        return 1.0

    def build(self, variables):
        super().build(variables)
        # Resolved once, by position: `update_step` may receive a backend
        # variable (a tf.Variable, or one replica's copy under a strategy)
        # whose name is not the Keras path; the optimizer's index maps it back.
        self._multipliers = [self.multiplier_for(variable.path) for variable in variables]
        # Decoupled weight decay is `w -= lr * wd * w` with the variable's own
        # (scaled) rate, as in per-layer parameter groups elsewhere; Keras
        # applies it with the global rate just before `update_step`, so it is
        # moved into `update_step`, in the same order (PerVariableWeightDecay).
        self._decayed = [keras_compat.uses_weight_decay(self, variable) for variable in variables]

    def update_step(self, gradient, variable, learning_rate):
        index = keras_compat.variable_index(self, variable)
        multiplier = self._multipliers[index]
        if multiplier != 1.0:
            learning_rate = learning_rate * multiplier
        if self._decayed[index]:
            rate = ops.cast(learning_rate * self.weight_decay, variable.dtype)
            self.assign_sub(variable, ops.multiply(variable, rate))
        super().update_step(gradient, variable, learning_rate)

    def get_config(self):
        config = super().get_config()
        config["learning_rate_multipliers"] = dict(self.learning_rate_multipliers)
        return config


@serialization.register
class LayerwiseSGD(LayerwiseLearningRate, keras.optimizers.SGD):
    """`keras.optimizers.SGD` with a learning-rate multiplier per layer.

    Args:
        learning_rate_multipliers: dict of layer name to multiplier.
        **kwargs: `keras.optimizers.SGD` arguments.
    """


@serialization.register
class LayerwiseAdamW(LayerwiseLearningRate, keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` with a learning-rate multiplier per layer.

    Weight decay follows each variable's scaled learning rate (decoupled
    decay is `learning_rate * weight_decay * variable`).

    Args:
        learning_rate_multipliers: dict of layer name to multiplier.
        **kwargs: `keras.optimizers.AdamW` arguments.
    """
