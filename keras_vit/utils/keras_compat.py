"""The one place keras_vit uses private Keras, torch or JAX names or goes around a Keras op.

Each entry buys what its line says; docs/performance.md, "What each Keras
workaround buys", has the measurement behind it. tests/test_keras_compat.py
has one test per internal that fails, naming the change, when Keras (or
torch, JAX) changes it; the tested Keras range is pinned in pyproject.toml.

- `uses_weight_decay`, `variable_index`, `PerVariableWeightDecay` (the
  optimizer's `_use_weight_decay`, `_get_variable_index`,
  `_apply_weight_decay`): layer-wise learning rates with decoupled weight
  decay, which Keras has no public hook for.
- `SyncFreeSGDUpdate` (`_backend_update_step`, `SGD.momentums`,
  `torch._foreach_*`): a torch SGD update that never reads the learning
  rate back to the host (GPU training throughput, one compiled graph).
- `AtomicBackupWrites` (`BackupAndRestore._save_model` and its paths):
  backups written atomically.
- `sublayers` (`Layer._flatten_layers`): every layer inside a layer.
- `serializer_imports_no_tensorflow` (`serialization_lib.tf`): the command
  line reads configs on JAX and PyTorch without importing TensorFlow.
- `remat` (`torch.utils.checkpoint._StopRecomputationError`, Keras's
  `AutocastScope`): torch's remat frees what it recomputed at once, and
  recomputes in the forward pass's mixed-precision dtype.
- `jax_backends_initialized` (`jax._src.xla_bridge`): an XLA flag set too
  late is refused instead of silently ignored.
- `call_sublayer` (`Layer.__call__` skipped, `Layer._remat_mode`): Keras's
  per-call overhead off a block's sublayers (eager torch speed).
- `dot_product_attention` (torch's `scaled_dot_product_attention` called
  directly): no copies of the query, key, value and output on torch.
- `padded_fused_attention`: cuDNN's fused attention in JAX training at an
  odd number of tokens.
- `dense` (`torch.addmm`): the bias added inside the product on torch.
- `uniform` (`keras.src.backend.torch.random`): random weights drawn in
  place on torch.
- `set_random_seed` (`keras.src.backend.common.global_state`): seeding
  without importing TensorFlow on JAX and PyTorch.

Example:

>>> import keras
>>> optimizer = keras.optimizers.AdamW(weight_decay=0.1)
>>> optimizer.exclude_from_weight_decay(var_names=["bias"])
>>> kernel, bias = keras.Variable(np.ones(2), name="kernel"), keras.Variable(np.ones(2), name="bias")
>>> optimizer.build([kernel, bias])
>>> uses_weight_decay(optimizer, kernel), uses_weight_decay(optimizer, bias)
(True, False)
>>> variable_index(optimizer, bias)
1
"""

import math

TESTED_KERAS = ">=3.15.1,<3.16"


def uses_weight_decay(optimizer, variable):
    """Whether `optimizer`'s weight decay applies to `variable` (its `exclude_from_weight_decay` rules)."""
    return bool(optimizer.weight_decay) and optimizer._use_weight_decay(variable)


def variable_index(optimizer, variable):
    """The position of `variable` among the variables `optimizer` was built with."""
    return optimizer._get_variable_index(variable)


class PerVariableWeightDecay:
    """Optimizer mixin: Keras's global weight-decay step is skipped; `update_step` applies it per variable.

    Keras applies decoupled weight decay to every variable with the global
    learning rate just before `update_step`; a subclass that scales the
    rate per variable applies `w -= lr * wd * w` itself, in `update_step`.
    """

    def _apply_weight_decay(self, variables):
        return


class SyncFreeSGDUpdate:
    """`keras.optimizers.SGD` mixin: on torch, the update never reads the learning rate back to the host.

    Keras's torch SGD passes the learning rate, a device tensor, as the
    Python-number `alpha` of `torch._foreach_add_`: each update waits for the
    device, and under `torch.compile` breaks the graph. Here `addcmul`
    multiplies the gradients by the rate on the device. The arithmetic is
    Keras's (`m = momentum * m - lr * g`, then `w += m`, or with Nesterov
    `w += momentum * m - lr * g`); the other backends keep Keras's update.
    """

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        import keras

        if keras.backend.backend() != "torch":
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        import torch

        with torch.no_grad():
            variables = [variable.value for variable in trainable_variables]
            # One 0-d tensor per gradient (a constant rate is a Keras variable: its tensor), which addcmul's
            # tensor-list form broadcasts without a copy.
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
    """`keras.callbacks.BackupAndRestore` mixin: the backup is written by `write_backup`.

    Keras writes the weights and the training metadata (`{"epoch", "batch"}`
    JSON, which it reads back to resume) straight into place; a subclass
    implements `write_backup(weights_path, metadata_path, metadata)` to
    write them another way (atomically).
    """

    def _save_model(self):
        self.write_backup(
            self._weights_path,
            self._training_metadata_path,
            {"epoch": self._current_epoch, "batch": self._last_batch_seen},
        )

    def write_backup(self, weights_path, metadata_path, metadata):
        raise NotImplementedError


def call_sublayer(layer, *args, **kwargs):
    """Runs a built sublayer from inside its parent layer's `call`, without Keras's `Layer.__call__`.

    `Layer.__call__`'s Python overhead is most of a small ViT's eager torch
    forward pass. Inside a parent's call it has nothing left to do for
    keras_vit's sublayers: they are built, take tensors of the parent's
    compute dtype, run in the parent's autocast scope (they share its dtype
    policy), get `training` passed explicitly, carry no masks, losses or
    activity regularizers, and the parent's own `__call__` still sets the
    layout of the block's output under a `keras.distribution`. A quantized
    sublayer runs its `quantized_call`, as `__call__` would; symbolic inputs
    and a layer under Keras's `RematScope` go through `__call__`.
    """
    import keras

    # Symbolic inputs (a functional model built from the block's `call`) and Keras's own `RematScope` (a private
    # `_remat_mode`) need `__call__`'s handling.
    # keras_vit passes its sublayers flat arguments: no `keras.tree.flatten` (on torch its recursive helper
    # closures hold the tensors in reference cycles until Python's cyclic collector runs).
    if getattr(layer, "_remat_mode", None) or any(
        isinstance(value, keras.KerasTensor) for value in (*args, *kwargs.values())
    ):
        return layer(*args, **kwargs)
    if layer.quantization_mode is not None:  # the property, which also reads a `DTypePolicyMap`
        return layer.quantized_call(*args, **kwargs)
    return layer.call(*args, **kwargs)


def sublayers(layer):
    """Every layer inside `layer`, at any depth (not `layer` itself)."""
    return list(layer._flatten_layers(include_self=False, recursive=True))


def fused_attention_compiles(dtype):
    """Whether `keras.ops.dot_product_attention` compiles for `dtype` here.

    JAX's implementation multiplies float16 queries and keys into float32
    logits, a product XLA's CPU backend cannot compile (under `jit`: every
    `fit` and `predict` on JAX).
    """
    import keras

    if keras.backend.backend() != "jax" or keras.backend.standardize_dtype(dtype) != "float16":
        return True
    import jax

    return jax.default_backend() != "cpu"


def flash_attention_argument(training=False, tokens=None):
    """The `flash_attention` argument for `keras.ops.dot_product_attention` over `tokens` tokens.

    A global choice, `keras.config.enable_flash_attention()` or
    `disable_flash_attention()`, is passed on unchanged. Otherwise:

    - torch: `False`. Left to Keras (`None`), the torch backend builds a
      `torch.backends.cuda.SDPAParams` on every call, which breaks a
      torch.compile graph; `False` calls `scaled_dot_product_attention`
      without forcing a kernel, so torch still picks its own (flash included).
    - JAX, training calls over an odd number of tokens (197 at 224 px): `False`.
      cuDNN's fused attention has no backward pass for an odd length, which
      Keras's inference-only check does not ask; on a GPU
      `dot_product_attention` pads such calls to an even length instead.
    - Otherwise `None`: Keras chooses (cuDNN on a recent GPU).
    """
    import keras

    chosen = keras.config.is_flash_attention_enabled()
    if chosen is not None:
        return chosen
    backend = keras.backend.backend()
    if backend == "torch":
        return False
    if backend == "jax" and training and isinstance(tokens, int) and tokens % 2:
        return False
    return None


def dot_product_attention(query, key, value, flash_attention=None):
    """`keras.ops.dot_product_attention(query, key, value, flash_attention=...)` without Keras's copies on torch.

    Inputs of shape `(batch, tokens, heads, head_dim)`, as Keras takes them;
    the output has that shape too. Keras's torch backend copies the query,
    key and value into contiguous heads-first tensors, and its heads-first
    output costs one more copy, kept for the backward pass. Here torch's
    kernel gets strided heads-first views of the token-major inputs (as timm
    passes them) and writes a token-major output: the same values, no
    copies. A `flash_attention=True` (forced) and the other backends go to
    `keras.ops.dot_product_attention` as they are.
    """
    import keras

    if isinstance(query, keras.KerasTensor):
        return keras.ops.dot_product_attention(query, key, value, flash_attention=flash_attention)
    if keras.backend.backend() == "jax" and flash_attention is False and query.shape[1] % 2 and _jax_on_gpu():
        if keras.config.is_flash_attention_enabled() is None:
            return padded_fused_attention(query, key, value, implementation="cudnn")
    if keras.backend.backend() != "torch" or flash_attention is True:
        return keras.ops.dot_product_attention(query, key, value, flash_attention=flash_attention)
    import torch

    heads_first = [tensor.transpose(1, 2) for tensor in (query, key, value)]
    return torch.nn.functional.scaled_dot_product_attention(*heads_first).transpose(1, 2)


def _jax_on_gpu():
    import jax

    return jax.default_backend() == "gpu"


# cuDNN's fused attention differentiates over even lengths only; a benchmark may try a larger multiple.
ATTENTION_LENGTH_MULTIPLE = 2


def padded_fused_attention(query, key, value, implementation=None, multiple=None):
    """JAX's `dot_product_attention` over a sequence padded to a multiple of `multiple` tokens, padded keys masked.

    Buys cuDNN's fused attention in training at 197 tokens (its backward pass
    refuses odd lengths; Keras falls back to XLA's attention). The padded
    query rows are sliced off, and the kernel's length mask hides the padded
    keys, so every real query attends to exactly the keys it had.
    """
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


def dense(layer, inputs):
    """`layer(inputs)` for a built `keras.layers.Dense` on `inputs` of shape `(..., features)`, its bias fused into
    the product on torch.

    Keras's `Dense` computes `matmul(inputs, kernel)` and then `add(..., bias)`:
    on torch two output-sized tensors per call. Here torch folds the leading
    axes into rows (a view, as `torch.nn.functional.linear` does) and
    `torch.addmm(bias, rows, kernel)` (what `torch.nn.Linear` calls) writes the
    output once: equal to Keras's result up to float rounding.

    Only a plain float `Dense` on torch takes that path: the kernel and bias as
    the layer reads them (cast by Keras's autocast scope under mixed
    precision) and the inputs all of one dtype, no activation, no LoRA, no
    quantization, not under Keras's `RematScope`, inputs a torch tensor.
    Anything else, symbolic inputs included, goes to `call_sublayer(layer,
    inputs)`.
    """
    import keras

    if keras.backend.backend() != "torch" or not _plain_dense(layer):
        return call_sublayer(layer, inputs)
    import torch

    if not isinstance(inputs, torch.Tensor):  # symbolic, or arrays that the layer converts
        return call_sublayer(layer, inputs)
    # `.value`: the variable as the layer reads it, cast under Keras's autocast scope (no `keras.ops` dispatch).
    kernel, bias = layer.kernel.value, layer.bias.value
    if not kernel.dtype == bias.dtype == inputs.dtype:
        return call_sublayer(layer, inputs)
    leading = tuple(inputs.shape[:-1])
    # Explicit rows, never -1: torch cannot infer -1 for an empty batch.
    product = torch.addmm(bias, inputs.reshape(math.prod(leading), inputs.shape[-1]), kernel)
    return product.reshape(*leading, kernel.shape[-1])


def _plain_dense(layer):
    import keras

    return (
        type(layer) is keras.layers.Dense  # a subclass may override `call`
        and layer.use_bias
        and layer.activation is keras.activations.linear
        and not layer.lora_enabled
        and layer.quantization_mode is None
        and not getattr(layer, "_remat_mode", None)
    )


def uniform(shape, minval, maxval, dtype=None, seed=None):
    """`keras.random.uniform(shape, minval, maxval, dtype, seed)`, the same numbers, drawn in place on torch.

    Keras's torch version returns `(maxval - minval) * rand + minval`, two
    more tensors of the result's size, whose holes between a model's weights
    stay resident in the heap. Here the same generator fills one tensor,
    scaled in place. Other backends, scalars and the symbolic "meta" device
    run Keras's own.
    """
    import keras

    if keras.backend.backend() == "torch" and len(shape) > 0:
        import torch
        from keras.src.backend.torch import core
        from keras.src.backend.torch import random as torch_random

        device = core.get_device()
        if device != "meta":
            values = torch.rand(
                size=tuple(shape),
                generator=torch_random.torch_seed_generator(seed),
                dtype=core.to_torch_dtype(dtype or keras.config.floatx()),
                device=device,
            )
            return values.mul_(maxval - minval).add_(minval)
    return keras.random.uniform(shape, minval=minval, maxval=maxval, dtype=dtype, seed=seed)


def remat(function):
    """`keras.remat(function)`, recomputed in the caller's mixed-precision scope, without leaking the recomputed
    activations on the torch backend.

    Mixed precision: a layer's `__call__` opens Keras's autocast scope, in
    which its float32 variables are read as its compute dtype (bfloat16 under
    `mixed_bfloat16`), and closes it when the call returns. The backward pass
    recomputes `function` after that (torch and TensorFlow), outside the scope:
    it would read float32 weights and compute in float32, other values than the
    forward pass's (torch refuses them: "Recomputed values ... have different
    metadata"). So the scope open when `remat` is called is reopened around
    every run of `function`.

    Keras's torch `remat` is `torch.utils.checkpoint`, which ends the
    recomputation early by raising torch's `_StopRecomputationError` through
    the layers; Keras's layer calls keep it, with the recomputed activations
    in their frames, in reference cycles that only Python's cyclic collector
    frees, often after the next step's peak. The frames it left are cleared
    before it goes on to torch; any other exception keeps its frames.
    """
    import keras

    function = _in_autocast_scope(function, _autocast_dtype())
    if keras.backend.backend() != "torch":
        return keras.remat(function)
    import torch.utils.checkpoint

    stop_recomputation = getattr(torch.utils.checkpoint, "_StopRecomputationError", None)
    if stop_recomputation is None:  # a torch that renamed it: no early stop, so nothing is raised
        rematerialized = keras.remat(function)

        def recompute_whole_block(*args, **kwargs):
            with torch.utils.checkpoint.set_checkpoint_early_stop(False):  # read in the forward pass
                return rematerialized(*args, **kwargs)

        return recompute_whole_block

    def recompute(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except stop_recomputation as stop:
            _clear_traceback_frames(stop)
            raise

    return keras.remat(recompute)


def _autocast_dtype():
    """The dtype Keras's autocast scope reads float variables as, here and now (None: no scope is open)."""
    from keras.src.backend import get_autocast_scope

    scope = get_autocast_scope()
    return None if scope is None else scope.dtype


def _in_autocast_scope(function, dtype):
    """`function`, run inside Keras's autocast scope for `dtype` (a scope of None reads variables as they are).

    The scope is opened only where another one is open (the recomputation in the backward pass): in the forward
    pass it is open already, and opening it again would write Keras's global state inside the rematerialized
    function, a side effect that stops torch.compile from tracing `torch.utils.checkpoint`.
    """
    from keras.src.backend import AutocastScope

    def scoped(*args, **kwargs):
        if _autocast_dtype() == dtype:
            return function(*args, **kwargs)
        with AutocastScope(dtype):
            return function(*args, **kwargs)

    return scoped


def _clear_traceback_frames(error):
    """Drops the locals of every finished frame in `error`'s tracebacks and those of its causes and contexts."""
    import traceback

    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        traceback.clear_frames(error.__traceback__)  # skips frames still running (this one)
        error = error.__cause__ or error.__context__


def jax_backends_initialized():
    """Whether JAX has created its backends in this process (and so read `XLA_FLAGS`); False if unknowable."""
    from jax._src import xla_bridge

    initialized = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(initialized and initialized())


def set_random_seed(seed):
    """`keras.utils.set_random_seed`, without importing TensorFlow on the JAX and PyTorch backends.

    Seeds Python's `random`, NumPy, the Keras global seed (initializers and
    `keras.random` without a seed), PyTorch on the torch backend, and
    TensorFlow where it is the backend or already imported (tf.data), exactly
    as Keras does; Keras's own function imports TensorFlow whenever it is
    installed.

    Args:
        seed: int.
    """
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


class _ImportedTensorFlow:
    """Keras's lazy `tensorflow` module, `available` only once something imported TensorFlow."""

    def __init__(self, lazy):
        self._lazy = lazy

    @property
    def available(self):
        import sys

        return "tensorflow" in sys.modules and self._lazy.available

    def __getattr__(self, name):
        return getattr(self._lazy, name)


def serializer_imports_no_tensorflow():
    """Stops Keras's serializer (`get_config`, saving) from importing TensorFlow just to ask whether it could.

    Keras's serializer asks its lazy `tensorflow` module whether it is
    available before each of its `tf.TensorShape` checks, which imports
    TensorFlow on the JAX and PyTorch backends too. Only the command line
    calls this, before its command runs (never `import keras_vit`); it is
    idempotent. A TensorFlow object to serialize exists only once TensorFlow
    is imported, and then the checks run as before.
    """
    from keras.src.saving import serialization_lib

    if not isinstance(serialization_lib.tf, _ImportedTensorFlow):
        serialization_lib.tf = _ImportedTensorFlow(serialization_lib.tf)
