"""The one place keras_vit uses private Keras, torch or JAX names or goes around a Keras op.

What each entry buys is measured in docs/performance.md ("What each Keras workaround buys"); each has a test in
tests/test_keras_compat.py that fails when Keras (or torch, JAX) changes what it relies on.
"""

TESTED_KERAS = ">=3.15.1,<4"

# cuDNN's fused attention differentiates over even lengths only; a benchmark may try a larger multiple.
ATTENTION_LENGTH_MULTIPLE = 2


def uses_weight_decay(optimizer, variable):
    """Whether `optimizer`'s weight decay applies to `variable` (its `exclude_from_weight_decay` rules)."""
    return bool(optimizer.weight_decay) and optimizer._use_weight_decay(variable)


def variable_index(optimizer, variable):
    """The position of `variable` among the variables `optimizer` was built with."""
    return optimizer._get_variable_index(variable)


class PerVariableWeightDecay:
    """Optimizer mixin: Keras's global weight-decay step is skipped; the subclass's `update_step` decays."""

    def _apply_weight_decay(self, variables):
        return


class SyncFreeSGDUpdate:
    """`keras.optimizers.SGD` mixin: Keras's arithmetic, without reading the rate back to the host on torch."""

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        import keras

        if keras.backend.backend() != "torch":
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        import torch

        with torch.no_grad():
            variables = [variable.value for variable in trainable_variables]
            # One 0-d tensor per gradient, which addcmul's tensor-list form broadcasts without a copy.
            rates = [keras.ops.convert_to_tensor(learning_rate)] * len(grads)
            if self.momentum == 0:
                torch._foreach_addcmul_(variables, grads, rates, value=-1)
                return
            buffers = [self.momentums[variable_index(self, variable)].value for variable in trainable_variables]
            torch._foreach_mul_(buffers, self.momentum)
            torch._foreach_addcmul_(buffers, grads, rates, value=-1)
            if self.nesterov:
                torch._foreach_addcmul_(variables, grads, rates, value=-1)
                torch._foreach_add_(variables, buffers, alpha=self.momentum)
            else:
                torch._foreach_add_(variables, buffers)


class AtomicBackupWrites:
    """`keras.callbacks.BackupAndRestore` mixin: the subclass's `write_backup` writes the backup."""

    def _save_model(self):
        self.write_backup(
            self._weights_path,
            self._training_metadata_path,
            {"epoch": self._current_epoch, "batch": self._last_batch_seen},
        )


def sublayers(layer):
    """Every layer inside `layer`, at any depth (not `layer` itself)."""
    return list(layer._flatten_layers(include_self=False, recursive=True))


def fused_attention_compiles(dtype):
    """Whether `keras.ops.dot_product_attention` compiles for `dtype` (not float16 on JAX's CPU backend)."""
    import keras

    if keras.backend.backend() != "jax" or keras.backend.standardize_dtype(dtype) != "float16":
        return True
    import jax

    return jax.default_backend() != "cpu"


def dot_product_attention(query, key, value, training=False, mask=None):
    """`keras.ops.dot_product_attention` on `(batch, tokens, heads, head_dim)` inputs, choosing the kernel.

    torch runs `scaled_dot_product_attention` on heads-first views (Keras's op copies its inputs and breaks
    torch.compile graphs); JAX pads an odd-length training call on a GPU, where cuDNN has no backward pass. An
    optional bool `mask` (broadcast to `(batch, heads, queries, keys)`) keeps the keys it marks True.
    """
    import keras

    chosen = keras.config.is_flash_attention_enabled()
    backend = keras.backend.backend()
    if chosen is True or backend == "tensorflow" or isinstance(query, keras.KerasTensor):
        return keras.ops.dot_product_attention(query, key, value, mask=mask, flash_attention=chosen)
    if backend == "torch":
        import torch

        heads_first = [tensor.transpose(1, 2) for tensor in (query, key, value)]
        return torch.nn.functional.scaled_dot_product_attention(*heads_first, attn_mask=mask).transpose(1, 2)
    import jax

    if chosen is None and training and query.shape[1] % 2:
        # The padding below masks by sequence lengths only: a padding mask takes XLA's attention instead.
        if jax.default_backend() == "gpu" and mask is None:
            return padded_fused_attention(query, key, value, implementation="cudnn")
        chosen = False
    return keras.ops.dot_product_attention(query, key, value, mask=mask, flash_attention=chosen)


def padded_fused_attention(query, key, value, implementation=None, multiple=None):
    """JAX's `dot_product_attention` over tokens padded to a multiple of `multiple`: the unpadded attention."""
    import jax
    import jax.numpy as jnp

    multiple = multiple or ATTENTION_LENGTH_MULTIPLE
    batch, length = query.shape[0], query.shape[1]
    padding = ((0, 0), (0, -length % multiple), (0, 0), (0, 0))
    query, key, value = (jnp.pad(tensor, padding) for tensor in (query, key, value))
    lengths = jnp.full((batch,), length, dtype="int32")
    attended = jax.nn.dot_product_attention(
        query, key, value, key_value_seq_lengths=lengths, implementation=implementation
    )
    return attended[:, :length]


def remat(function):
    """`keras.remat(function)`, recomputed in the caller's autocast scope, freeing torch's recomputation at once."""
    import keras
    from keras.src.backend.common.variables import AutocastScope, get_autocast_scope

    forward_dtype = getattr(get_autocast_scope(), "dtype", None)

    def scoped(*args, **kwargs):
        # Reopening an open scope writes global state that stops torch.compile tracing `torch.utils.checkpoint`.
        if getattr(get_autocast_scope(), "dtype", None) == forward_dtype:
            return function(*args, **kwargs)
        with AutocastScope(forward_dtype):
            return function(*args, **kwargs)

    if keras.backend.backend() != "torch":
        return keras.remat(scoped)
    import torch.utils.checkpoint

    def recompute(*args, **kwargs):
        try:
            return scoped(*args, **kwargs)
        except torch.utils.checkpoint._StopRecomputationError as stop:
            # torch's end of a recomputation: its frames would keep the recomputed activations alive in cycles.
            _clear_traceback_frames(stop)
            raise

    return keras.remat(recompute)


def _clear_traceback_frames(error):
    """Drops the locals of the finished frames of `error`, its causes and contexts."""
    import traceback

    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        traceback.clear_frames(error.__traceback__)
        error = error.__cause__ or error.__context__


def jax_backends_initialized():
    """Whether JAX has created its backends in this process (and so read `XLA_FLAGS`)."""
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


def set_random_seed(seed):
    """`keras.utils.set_random_seed(seed)`, without importing TensorFlow on the JAX and PyTorch backends."""
    import random
    import sys

    import keras
    import numpy as np

    backend = keras.backend.backend()
    if backend == "tensorflow" or "tensorflow" in sys.modules:
        keras.utils.set_random_seed(seed)
        return
    if not isinstance(seed, int):
        raise ValueError(f"`seed` must be an integer. Received: seed={seed!r}")
    from keras.src.backend.common import global_state
    from keras.src.random import seed_generator
    from keras.src.utils import rng_utils

    global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)
    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)
    random.seed(seed)
    np.random.seed(seed)
    if backend == "torch":
        import torch

        torch.manual_seed(seed)
