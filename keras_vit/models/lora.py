"""LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models") for a `VisionTransformer`.

Keras's own `Dense.enable_lora` adds the low-rank adapters; this module picks the projections, freezes
everything else but the head, and folds the adapters back into plain kernels.
"""

import keras

from keras_vit.utils import keras_compat, validation

# The projections each target names, by the `Dense` layers' names inside a transformer block.
LORA_TARGETS = {"attention": ("qkv", "output"), "mlp": ("fc1", "fc2")}


def check_targets(targets):
    """`targets` as a tuple of `LORA_TARGETS` keys, or a one-line `ValueError`."""
    targets = (targets,) if isinstance(targets, str) else tuple(targets)
    if not targets or any(target not in LORA_TARGETS for target in targets):
        raise ValueError(f"`lora_targets` must name some of {tuple(LORA_TARGETS)}. Received: lora_targets={targets!r}")
    return targets


def enable_lora(model, rank, targets=("attention",), alpha=None):
    """Adds adapters to `model`'s `targets` projections and freezes every weight but theirs and the head's.

    See `VisionTransformer.enable_lora` for the arguments.
    """
    rank = validation.positive_int("lora_rank", rank)
    names = {name for target in targets for name in LORA_TARGETS[target]}
    layers = [
        layer
        for layer in keras_compat.sublayers(model)
        if isinstance(layer, keras.layers.Dense) and layer.name in names and "encoder_block_" in layer.path
    ]
    for layer in layers:
        layer.enable_lora(rank, lora_alpha=alpha)
    trainable = {id(v) for layer in layers for v in (layer.lora_kernel_a, layer.lora_kernel_b)}
    if model.include_top:
        heads = ("head", "head_dist") if model.distillation_token else ("head",)  # DeiT averages two heads
        trainable |= {id(v) for name in heads for v in model.get_layer(name).weights}
    for variable in model.weights:
        variable.trainable = id(variable) in trainable


def redraw_folded_adapters(model):
    """Draws `lora_kernel_a` again in every LoRA projection of `model` whose adapters are both zero.

    Keras saves a LoRA projection with its adapters folded into the kernel and loads it back with both at zero, where
    neither receives a gradient; a new `a` (drawn as `Dense.enable_lora` draws it) against the zero `b` keeps the
    function and lets training go on.
    """
    for layer in keras_compat.sublayers(model):
        if isinstance(layer, keras.layers.Dense) and layer.lora_enabled:
            adapter = layer.lora_kernel_a
            if not keras.ops.convert_to_numpy(adapter).any():
                adapter.assign(keras.initializers.HeUniform()(adapter.shape, dtype=adapter.dtype))


def merge_into(lora_model, plain_model):
    """Copies `lora_model`'s weights into `plain_model` (the same architecture without LoRA), the adapters
    folded into the kernels in float32: `kernel + (alpha / rank) * a @ b`."""
    plain = {variable.path: variable for variable in plain_model.weights}
    for variable in lora_model.weights:
        if variable.path in plain:
            plain[variable.path].assign(variable)
    for layer in keras_compat.sublayers(lora_model):
        if isinstance(layer, keras.layers.Dense) and layer.lora_enabled:
            # `layer.kernel` is already merged, but in the compute dtype: merge the stored float32 kernel instead.
            (kernel,) = [variable for variable in layer.weights if variable.name == "kernel"]
            scale = layer.lora_alpha / layer.lora_rank
            delta = keras.ops.matmul(layer.lora_kernel_a, layer.lora_kernel_b) * scale
            plain[kernel.path].assign(keras.ops.add(kernel, keras.ops.cast(delta, kernel.dtype)))
