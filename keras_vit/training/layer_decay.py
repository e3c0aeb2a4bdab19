"""Layer-wise learning-rate decay for fine-tuning (BEiT, Bao et al. 2022; MAE and DeiT III).

`LayerwiseSGD` and `LayerwiseAdamW` are subclasses, not wrappers: the PyTorch backend swaps the exact `SGD` / `AdamW`
classes for fused updates that never call `update_step`.
"""

import keras
from keras import ops

from keras_vit.models.vit import find_vit
from keras_vit.utils import keras_compat, serialization, validation


def layer_decay_multipliers(model, decay):
    """The learning-rate multiplier of every layer of a ViT: `decay ** (L - i)` for block `i` of `L`.

    Args:
        model: a `keras_vit.VisionTransformer`, or a model containing one.
        decay: float in (0, 1], the per-block decay (0.65 to 0.75 is usual).

    Returns:
        A dict of layer name to multiplier.

    Example:

    >>> import keras_vit
    >>> model = keras_vit.VisionTransformer(patch_size=4, hidden_dim=8, num_layers=2,
    ...     num_heads=2, mlp_dim=16, input_shape=(8, 8, 3), classes=2)
    >>> multipliers = layer_decay_multipliers(model, 0.5)
    >>> multipliers["patch_embedding"], multipliers["encoder_block_0"], multipliers["encoder_block_1"]
    (0.125, 0.25, 0.5)
    """
    validation.finite_float("decay", decay, minimum=0, maximum=1, include_minimum=False)
    vit = find_vit(model)
    depth = vit.num_layers
    embeddings = ("patch_embedding", "class_token", "register_tokens", "position_embedding")
    names = {layer.name for layer in vit.layers}
    multipliers = {name: float(decay ** (depth + 1)) for name in embeddings if name in names}
    multipliers.update({f"encoder_block_{index}": float(decay ** (depth - index)) for index in range(depth)})
    return multipliers


class LayerwiseLearningRate(keras_compat.PerVariableWeightDecay):
    """Keras optimizer mixin: scales the learning rate per variable by `learning_rate_multipliers[layer name]`.

    A variable's layer is the first component of its path found in the dict; 1.0 for layers not listed.
    """

    def __init__(self, *args, learning_rate_multipliers=None, **kwargs):
        super().__init__(*args, **kwargs)
        multipliers = learning_rate_multipliers or {}
        self.learning_rate_multipliers = {name: float(value) for name, value in multipliers.items()}

    def multiplier_for(self, path):
        """The multiplier of a variable with this `path`."""
        for component in path.split("/"):
            if component in self.learning_rate_multipliers:
                return self.learning_rate_multipliers[component]
        return 1.0

    def build(self, variables):
        super().build(variables)
        # By position: `update_step` may receive a backend variable (one replica's copy) without the Keras path.
        self._multipliers = [self.multiplier_for(variable.path) for variable in variables]
        # Decoupled weight decay, `w -= lr * wd * w`, with each variable's own rate (PerVariableWeightDecay).
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
    """`keras.optimizers.SGD` with a learning-rate multiplier per layer (`learning_rate_multipliers`)."""


@serialization.register
class LayerwiseAdamW(LayerwiseLearningRate, keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` with a learning-rate multiplier per layer; weight decay follows the scaled rate."""
