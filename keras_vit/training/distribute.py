"""Picking the distribution strategy, the precision and XLA for the hardware.

TensorFlow backend (`tf.distribute`): `TPUStrategy` when a TPU is reachable,
`MirroredStrategy` over the local GPUs when there are several, else the
default strategy. Build and compile the model inside `setup.scope()`; the
global batch is the per-replica batch times `setup.num_replicas`, and the
learning rate is scaled with it (`setup.scale_learning_rate`).

Keras 3 does not support `tf.distribute.MultiWorkerMirroredStrategy`
(keras-team/keras issue 20585). Across processes (several hosts, a TPU pod
slice) use the JAX backend: `keras_vit.training.multihost.initialize()` on every
process first, then `configure()` lays the model out over the devices of
all processes, and each process feeds its own shard of the input
(`keras_vit.training.multihost`).

JAX backend (`keras.distribution`): `data_parallel()` replicates the model
and splits the batch over all devices; `model_parallel()` additionally
shards the attention and MLP kernels (`vit_layout_map`) for the large
variants, Megatron style: the first matrix of each pair split by output
columns, the second by input rows.
"""

import dataclasses
import math

import keras

from keras_vit.training import multihost
from keras_vit.utils import validation

STRATEGIES = ("auto", "default", "mirrored", "tpu")
PRECISIONS = ("auto", "float32", "mixed_bfloat16", "mixed_float16")


@dataclasses.dataclass
class Setup:
    """The result of `configure`.

    Attributes:
        strategy: a `tf.distribute.Strategy`, or `None` off the TensorFlow
            backend.
        precision: the global dtype policy name that was set.
        jit_compile: bool, what to pass to `model.compile(jit_compile=...)`.
        num_replicas: int, the data-parallel replicas (of all processes).
        device: str, `"tpu"`, `"gpu"` or `"cpu"`.
        processes: `multihost.ProcessInfo`, this process among the
            processes of the run (count 1 in a single-process run).
    """

    strategy: object
    precision: str
    jit_compile: bool
    num_replicas: int
    device: str
    processes: multihost.ProcessInfo = dataclasses.field(default_factory=multihost.ProcessInfo)

    def scope(self):
        """The scope to build and compile the model in."""
        if self.strategy is None:
            import contextlib

            return contextlib.nullcontext()
        return self.strategy.scope()

    def global_batch_size(self, per_replica_batch_size):
        return per_replica_batch_size * self.num_replicas

    def scale_learning_rate(self, learning_rate, per_replica_batch_size, reference_batch_size=512):
        """Linear scaling: `learning_rate` is for `reference_batch_size`."""
        return learning_rate * self.global_batch_size(per_replica_batch_size) / reference_batch_size


def _find_tpu():
    import glob
    import os

    import tensorflow as tf

    # Only look where a TPU can be: asking the resolver elsewhere probes the
    # GCE metadata server, which hangs without network.
    if not (
        os.environ.get("TPU_NAME")
        or os.environ.get("COLAB_TPU_ADDR")
        or os.environ.get("TPU_ACCELERATOR_TYPE")
        or glob.glob("/dev/accel*")
        or glob.glob("/dev/vfio/[0-9]*")
    ):
        return None
    try:
        return tf.distribute.cluster_resolver.TPUClusterResolver()
    except (ValueError, RuntimeError):
        return None


def select_strategy(strategy="auto"):
    """Returns `(tf.distribute.Strategy, device)` for the TensorFlow backend.

    Args:
        strategy: `"auto"` (TPU, else several GPUs, else default),
            `"tpu"`, `"mirrored"` (all local GPUs, or all CPUs/logical
            devices when there is no GPU) or `"default"`.

    Returns:
        `(strategy, device)` with device `"tpu"`, `"gpu"` or `"cpu"`.
    """
    import tensorflow as tf

    validation.one_of("strategy", strategy, STRATEGIES)
    if strategy in ("auto", "tpu"):
        resolver = _find_tpu()
        if resolver is not None:
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
            return tf.distribute.TPUStrategy(resolver), "tpu"
        if strategy == "tpu":
            raise ValueError("`strategy='tpu'` but no TPU was found; use 'auto' or 'mirrored'.")
    gpus = tf.config.list_logical_devices("GPU")
    device = "gpu" if gpus else "cpu"
    if strategy == "mirrored" or (strategy == "auto" and len(gpus) > 1):
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices), device
    return tf.distribute.get_strategy(), device


def _gpu_supports_bfloat16():
    import tensorflow as tf

    for gpu in tf.config.list_physical_devices("GPU"):
        capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if not capability or capability[0] < 8:  # bfloat16 tensor cores arrive with Ampere (8.0)
            return False
    return True


def _jax_device():
    import jax

    return jax.devices()[0].platform  # "cpu", "gpu" or "tpu"


def select_precision(precision="auto", device="cpu"):
    """The dtype policy for `device`: bfloat16 on TPU and Ampere+ GPUs, float16
    (with loss scaling, which `compile` adds itself) on older GPUs, float32 on CPU."""
    validation.one_of("precision", precision, PRECISIONS)
    if precision != "auto":
        return precision
    if device == "tpu":
        return "mixed_bfloat16"
    if device == "gpu":
        if keras.backend.backend() == "tensorflow":
            return "mixed_bfloat16" if _gpu_supports_bfloat16() else "mixed_float16"
        return "mixed_bfloat16"
    return "float32"


def configure(strategy="auto", precision="auto"):
    """Picks strategy, precision and XLA for the hardware and sets the policy.

    On TensorFlow this selects a `tf.distribute` strategy; on JAX with more
    than one device it sets `keras.distribution.DataParallel` over the
    devices of all processes; on PyTorch it runs on the default device.

    In a multi-process run (after `multihost.initialize`) the distribution
    does not shard the input itself: each process must feed its own part of
    every global batch (`multihost.data_shard`,
    `multihost.per_process_batch_size`), which saves every host from
    reading and augmenting the examples of the others.

    XLA (`jit_compile=True`) is chosen on TensorFlow without a strategy and
    under `TPUStrategy` (Keras's "auto" means off on CPU, but XLA halves the
    CPU time of a ViT step even there) and on JAX (always compiled). It is off
    under `MirroredStrategy`, where XLA cannot reach the replicas' variables on
    other devices, and on PyTorch (`torch.compile` is slow to start).

    Args:
        strategy: one of `STRATEGIES`.
        precision: one of `PRECISIONS`.

    Returns:
        A `Setup`.

    Example:

    ```python
    setup = keras_vit.training.distribute.configure()
    with setup.scope():
        model = keras_vit.ViTB16(weights="augreg_in21k_ft_in1k")
        model.compile(..., jit_compile=setup.jit_compile)
    ```
    """
    validation.one_of("strategy", strategy, STRATEGIES)
    backend = keras.backend.backend()
    tf_strategy = None
    if backend == "tensorflow":
        tf_strategy, device = select_strategy(strategy)
        replicas = tf_strategy.num_replicas_in_sync
    else:
        if strategy in ("mirrored", "tpu"):
            raise ValueError(
                f"`strategy={strategy!r}` is a tf.distribute strategy and needs KERAS_BACKEND=tensorflow; "
                f"on {backend} use 'auto' (JAX: keras.distribution over all devices)."
            )
        if backend == "jax":
            import jax

            device = _jax_device()
            replicas = jax.device_count()
            processes = multihost.process_info()
            if processes.count > 1 and strategy != "auto":
                raise ValueError(
                    f"A multi-process run needs strategy='auto' (keras.distribution over the devices of all "
                    f"{processes.count} processes). Received: strategy={strategy!r}"
                )
            if replicas > 1 and strategy == "auto":
                keras.distribution.set_distribution(data_parallel(auto_shard_dataset=processes.count == 1))
            else:
                replicas = 1
        else:
            import torch

            device = "gpu" if torch.cuda.is_available() else "cpu"
            replicas = 1
    policy = select_precision(precision, device)
    keras.config.set_dtype_policy(policy)
    if backend == "tensorflow":
        import tensorflow as tf

        jit_compile = not isinstance(tf_strategy, tf.distribute.MirroredStrategy)
    else:
        jit_compile = backend == "jax"
    return Setup(tf_strategy, policy, jit_compile, replicas, device, multihost.process_info())


def data_parallel(devices=None, auto_shard_dataset=True):
    """`keras.distribution.DataParallel` over `devices` (default: all, of all processes).

    Args:
        devices: the devices; default all.
        auto_shard_dataset: bool. `True`: in a multi-process run Keras gives
            each process its slice of every batch of a `tf.data` pipeline
            that yields global batches. `False`: each process already
            yields only its own part (see `keras_vit.training.multihost`).
    """
    devices = devices or keras.distribution.list_devices()
    return keras.distribution.DataParallel(devices=devices, auto_shard_dataset=auto_shard_dataset)


# Megatron-style sharding of the two matrix pairs of every transformer block:
# qkv and fc1 split their output columns over "model", output and fc2 their
# input rows, so each pair needs one all-reduce. Paths are `variable.path`
# (e.g. encoder_block_3/attention/qkv/kernel).
_MODEL_PARALLEL_LAYOUT = {
    r".*attention/qkv/kernel": (None, "model"),
    r".*attention/output/kernel": ("model", None),
    r".*mlp/fc1/kernel": (None, "model"),
    r".*mlp/fc2/kernel": ("model", None),
}


def vit_layout_map(device_mesh):
    """The `keras.distribution.LayoutMap` that shards ViT attention and MLP kernels.

    Args:
        device_mesh: a `keras.distribution.DeviceMesh` with axes
            `("batch", "model")`.

    Returns:
        A `LayoutMap`; every other variable is replicated.
    """
    layout_map = keras.distribution.LayoutMap(device_mesh)
    for pattern, axes in _MODEL_PARALLEL_LAYOUT.items():
        layout_map[pattern] = axes
    return layout_map


def model_parallel(model_shards=2, devices=None, auto_shard_dataset=True):
    """`keras.distribution.ModelParallel` with `vit_layout_map` (JAX backend).

    Args:
        model_shards: int, devices each sharded kernel is split over; the
            rest of the devices form the data-parallel "batch" axis. It must
            divide the device count and the sharded dimensions (hidden and
            MLP sizes).
        devices: the devices; default all, of all processes. Each model
            shard group is `model_shards` consecutive devices, which are
            one process's own devices when `model_shards` divides the
            devices per process (then `model.save` on one process sees whole
            kernels).
        auto_shard_dataset: bool, see `data_parallel`.

    Returns:
        A `keras.distribution.ModelParallel`; use it with
        `keras.distribution.set_distribution` or its `.scope()` around model
        creation.
    """
    devices = devices or keras.distribution.list_devices()
    if len(devices) % model_shards:
        raise ValueError(
            f"`model_shards` must divide the {len(devices)} devices. Received: model_shards={model_shards}"
        )
    mesh = keras.distribution.DeviceMesh(
        shape=(len(devices) // model_shards, model_shards), axis_names=("batch", "model"), devices=devices
    )
    return keras.distribution.ModelParallel(
        layout_map=vit_layout_map(mesh), batch_dim_name="batch", auto_shard_dataset=auto_shard_dataset
    )


def replicas_for(global_batch_size, num_replicas):
    """Checks that the global batch splits evenly over the replicas."""
    if global_batch_size % num_replicas:
        raise ValueError(
            f"The global batch size {global_batch_size} must be divisible by the {num_replicas} replicas; "
            f"use e.g. {math.ceil(global_batch_size / num_replicas) * num_replicas}."
        )
    return global_batch_size // num_replicas
