"""The distribution strategy, the precision and XLA for the hardware (`tf.distribute` or `keras.distribution`)."""

import contextlib
import dataclasses
import glob
import os

import keras

from keras_vit.training import multihost
from keras_vit.training.settings import PRECISIONS, STRATEGIES
from keras_vit.utils import validation


@dataclasses.dataclass
class Setup:
    """What `configure` chose (`strategy`: `None` off TensorFlow; `device`: `"tpu"`, `"gpu"` or `"cpu"`)."""

    strategy: object
    precision: str
    jit_compile: bool
    num_replicas: int
    device: str

    def scope(self):
        """The scope to build and compile the model in."""
        return contextlib.nullcontext() if self.strategy is None else self.strategy.scope()

    def global_batch_size(self, per_replica_batch_size):
        return per_replica_batch_size * self.num_replicas

    def scale_learning_rate(self, learning_rate, per_replica_batch_size, reference_batch_size=512):
        """`learning_rate` (for `reference_batch_size`) scaled linearly to the global batch."""
        return learning_rate * self.global_batch_size(per_replica_batch_size) / reference_batch_size


def _find_tpu():
    import tensorflow as tf

    # Ask only where a TPU can be: elsewhere the resolver probes the GCE metadata server, which hangs offline.
    variables = ("TPU_NAME", "COLAB_TPU_ADDR", "TPU_ACCELERATOR_TYPE")
    if not (
        any(os.environ.get(name) for name in variables) or glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*")
    ):
        return None
    try:
        return tf.distribute.cluster_resolver.TPUClusterResolver()
    except (ValueError, RuntimeError):
        return None


def _tensorflow_strategy(strategy):
    import tensorflow as tf

    resolver = _find_tpu() if strategy in ("auto", "tpu") else None
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


def select_precision(precision="auto", device="cpu"):
    """The dtype policy: `"auto"` is bfloat16 on TPUs and Ampere or newer GPUs, float16 on older GPUs, else float32."""
    validation.one_of("precision", precision, PRECISIONS)
    if precision != "auto":
        return precision
    if device == "tpu":
        return "mixed_bfloat16"
    if device == "gpu" and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        details = [tf.config.experimental.get_device_details(gpu) for gpu in tf.config.list_physical_devices("GPU")]
        # bfloat16 tensor cores arrive with Ampere (compute capability 8.0).
        if not all((detail.get("compute_capability") or (0,))[0] >= 8 for detail in details):
            return "mixed_float16"
    return "mixed_bfloat16" if device == "gpu" else "float32"


def configure(strategy="auto", precision="auto"):
    """Picks strategy, precision and XLA for the hardware and sets the dtype policy; returns a `Setup`.

    XLA is on, except under `MirroredStrategy` (whose replicas' variables XLA cannot reach) and on PyTorch.

    Args:
        strategy: `"auto"`, `"default"`, `"mirrored"` (all local GPUs, or all logical CPUs) or `"tpu"`.
        precision: one of `settings.PRECISIONS`.
    """
    validation.one_of("strategy", strategy, STRATEGIES)
    backend = keras.backend.backend()
    tf_strategy = None
    replicas = 1
    if backend == "tensorflow":
        import tensorflow as tf

        tf_strategy, device = _tensorflow_strategy(strategy)
        replicas = tf_strategy.num_replicas_in_sync
        jit_compile = not isinstance(tf_strategy, tf.distribute.MirroredStrategy)
    elif strategy in ("mirrored", "tpu"):
        raise ValueError(
            f"`strategy={strategy!r}` is a tf.distribute strategy and needs KERAS_BACKEND=tensorflow; "
            f"on {backend} use 'auto' (JAX: keras.distribution over all devices)."
        )
    elif backend == "jax":
        import jax

        device = jax.devices()[0].platform
        processes = multihost.process_info().count
        if processes > 1 and strategy != "auto":
            raise ValueError(
                f"A multi-process run needs strategy='auto' (keras.distribution over the devices of all "
                f"{processes} processes). Received: strategy={strategy!r}"
            )
        if jax.device_count() > 1 and strategy == "auto":
            replicas = jax.device_count()
            # Each process of a multi-process run already yields only its own part of the batch.
            keras.distribution.set_distribution(keras.distribution.DataParallel(auto_shard_dataset=processes == 1))
        jit_compile = True
    else:
        import torch

        device = "gpu" if torch.cuda.is_available() else "cpu"
        jit_compile = False
    policy = select_precision(precision, device)
    keras.config.set_dtype_policy(policy)
    return Setup(tf_strategy, policy, jit_compile, replicas, device)


# Megatron-style sharding of `variable.path`s: qkv and fc1 split their output columns over "model", the output
# projection and fc2 their input rows, so each pair needs one all-reduce.
_MODEL_PARALLEL_LAYOUT = {
    r".*attention/qkv/kernel": (None, "model"),
    r".*attention/output/kernel": ("model", None),
    r".*mlp/fc1/kernel": (None, "model"),
    r".*mlp/fc2/kernel": ("model", None),
}


def model_parallel(model_shards=2, devices=None, auto_shard_dataset=True):
    """`keras.distribution.ModelParallel` sharding the attention and MLP kernels of ViTs (JAX backend).

    Args:
        model_shards: int, the devices each kernel is split over (a divisor of the device count and the widths).
        devices: the devices; default all, of all processes.
        auto_shard_dataset: bool, as in `keras.distribution.DataParallel`.
    """
    devices = devices or keras.distribution.list_devices()
    if len(devices) % model_shards:
        raise ValueError(
            f"`model_shards` must divide the {len(devices)} devices. Received: model_shards={model_shards}"
        )
    mesh = keras.distribution.DeviceMesh(
        shape=(len(devices) // model_shards, model_shards), axis_names=("batch", "model"), devices=devices
    )
    layout_map = keras.distribution.LayoutMap(mesh)
    for pattern, axes in _MODEL_PARALLEL_LAYOUT.items():
        layout_map[pattern] = axes  # every other variable is replicated
    return keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name="batch", auto_shard_dataset=auto_shard_dataset
    )


def replicas_for(global_batch_size, num_replicas):
    """The per-replica batch; raises unless `global_batch_size` splits evenly over the replicas."""
    if global_batch_size % num_replicas:
        suggestion = -(-global_batch_size // num_replicas) * num_replicas
        raise ValueError(
            f"The batch {global_batch_size} must split over {num_replicas} replicas: use e.g. {suggestion}."
        )
    return global_batch_size // num_replicas
