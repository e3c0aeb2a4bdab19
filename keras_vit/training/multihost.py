"""Training across processes (several hosts, or several processes on one host) with JAX.

Every process runs the same program: `initialize` joins JAX's distributed runtime, each process feeds its own part
of every global batch and process 0 alone writes files (`run_on_primary`). With no settings (arguments or the
environment variables of `keras.distribution.initialize`) the program is one process and every function is a no-op.
"""

import collections
import os
import socket

from keras_vit.utils import validation

ENV_JOB_ADDRESSES = "KERAS_DISTRIBUTION_JOB_ADDRESSES"
ENV_NUM_PROCESSES = "KERAS_DISTRIBUTION_NUM_PROCESSES"
ENV_PROCESS_ID = "KERAS_DISTRIBUTION_PROCESS_ID"
ENV_JAX_COORDINATOR = "JAX_COORDINATOR_ADDRESS"

# This process among the `count` processes of a run; process `index` 0 writes the files.
ProcessInfo = collections.namedtuple("ProcessInfo", ["count", "index"], defaults=(1, 0))
# The resolved `initialize` settings, as `jax.distributed.initialize` takes them (`None` fields: JAX detects them).
Settings = collections.namedtuple("Settings", ["coordinator_address", "num_processes", "process_id"])


def _env_int(name):
    value = os.environ.get(name)
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"The environment variable {name} must be an integer. Received: {name}={value!r}") from None


def settings(coordinator_address=None, num_processes=None, process_id=None):
    """The multi-process `Settings`: the arguments, else the environment; `None` for one process.

    `coordinator_address` is `"host:port"` of process 0, `"auto"` (JAX detects the cluster) or `None` (the first
    address of `KERAS_DISTRIBUTION_JOB_ADDRESSES`).
    """
    if coordinator_address is None:
        addresses = os.environ.get(ENV_JOB_ADDRESSES) or os.environ.get(ENV_JAX_COORDINATOR)
        coordinator_address = addresses.split(",")[0].strip() if addresses else None
    if num_processes is None:
        num_processes = _env_int(ENV_NUM_PROCESSES)
    if process_id is None:
        process_id = _env_int(ENV_PROCESS_ID)
    if coordinator_address is None and num_processes is None and process_id is None:
        return None
    if coordinator_address == "auto":
        if num_processes is not None or process_id is not None:
            raise ValueError(
                "With coordinator_address='auto' JAX detects the number of processes and the process id; do not "
                f"set them. Received: num_processes={num_processes!r}, process_id={process_id!r}"
            )
        return Settings(None, None, None)
    if not isinstance(coordinator_address, str) or ":" not in coordinator_address:
        raise ValueError(
            "`coordinator_address` must be 'host:port' of process 0 (or 'auto' on a cluster JAX detects). "
            f"Received: coordinator_address={coordinator_address!r}"
        )
    validation.positive_int("num_processes", num_processes)
    validation.non_negative_int("process_id", process_id)
    if process_id >= num_processes:
        raise ValueError(f"`process_id` must be below num_processes={num_processes}. Received: {process_id}")
    return Settings(coordinator_address, num_processes, process_id)


def initialize(coordinator_address=None, num_processes=None, process_id=None, *, seed=None, heartbeat_timeout=100):
    """Connects this process to the others of a multi-process run (JAX), before any JAX computation.

    Args:
        coordinator_address, num_processes, process_id: see `settings`.
        seed: int, Keras's global seed on every process (the same initial weights); `None`: process 0 draws one.
        heartbeat_timeout: int, seconds without a heartbeat after which JAX ends the other processes.

    Returns:
        The `ProcessInfo` of this process.
    """
    validation.positive_int("heartbeat_timeout", heartbeat_timeout)
    resolved = settings(coordinator_address, num_processes, process_id)
    if resolved is None:
        return process_info()
    import keras

    if keras.backend.backend() != "jax":
        raise ValueError(
            "Multi-process training runs on the JAX backend (Keras 3 has no MultiWorkerMirroredStrategy): set "
            f"KERAS_BACKEND=jax. Received: backend={keras.backend.backend()!r}"
        )
    import jax

    if jax.distributed.is_initialized():
        return process_info()
    try:
        jax.distributed.initialize(**resolved._asdict(), heartbeat_timeout_seconds=heartbeat_timeout)
    except RuntimeError as error:
        raise RuntimeError(
            f"Could not join the multi-process run at {resolved.coordinator_address} as process "
            f"{resolved.process_id} of {resolved.num_processes}: {error} Call initialize() first thing, before "
            "any JAX computation, and check that every process uses the same coordinator address and count."
        ) from error
    if seed is None:
        import numpy as np
        from jax.experimental import multihost_utils

        drawn = np.int32(np.random.SeedSequence().generate_state(1)[0] >> 1)
        seed = int(multihost_utils.broadcast_one_to_all(drawn))
    keras.utils.set_random_seed(seed)
    return process_info()


def process_info():
    """The `ProcessInfo` of this process (one process off JAX or before `initialize`)."""
    import keras

    if keras.backend.backend() != "jax":
        return ProcessInfo()
    import jax

    if not jax.distributed.is_initialized():
        return ProcessInfo()
    return ProcessInfo(count=jax.process_count(), index=jax.process_index())


def is_primary():
    """Whether this process writes the files (process 0, or the only one)."""
    return process_info().index == 0


def check_same(name, value):
    """Returns the int `value` after checking that every process holds the same; `name` says what it is."""
    if process_info().count == 1:
        return value
    import numpy as np
    from jax.experimental import multihost_utils

    gathered = np.asarray(multihost_utils.process_allgather(np.asarray(value, dtype=np.int64)))
    if not (gathered == gathered[0]).all():
        raise RuntimeError(
            f"The processes disagree on {name}: {gathered.tolist()} (process 0 first). Every process must see the "
            "same files: put the output folder on a filesystem all hosts share."
        )
    return value


def run_on_primary(function, name):
    """Runs `function()` on process 0 only, while the others wait; returns its result there, `None` elsewhere.

    If it raises, the others raise a `RuntimeError` naming `name`. It runs outside the global `keras.distribution`:
    read the model on every process first (on JAX, `self.model` in a callback gathers the training state).
    """
    info = process_info()
    if info.count == 1:
        return function()
    import keras
    import numpy as np
    from jax.experimental import multihost_utils

    result, failure = None, None
    if info.index == 0:
        distribution = keras.distribution.distribution()
        keras.distribution.set_distribution(None)
        try:
            result = function()
        except Exception as error:  # re-raised below, after the others heard of it
            failure = error
        finally:
            keras.distribution.set_distribution(distribution)
    succeeded = int(multihost_utils.broadcast_one_to_all(np.int32(failure is None)))
    if failure is not None:
        raise failure
    if not succeeded:
        raise RuntimeError(f"Process 0 failed to {name}; its log has the error.")
    return result


def data_shard():
    """`(num_shards, index)` of this process's part of the input (`shard=` of the pipelines), or `None`."""
    info = process_info()
    return None if info.count == 1 else (info.count, info.index)


def per_process_batch_size(global_batch_size):
    """The batch each process feeds: `global_batch_size` divided evenly over the processes."""
    validation.positive_int("global_batch_size", global_batch_size)
    count = process_info().count
    if global_batch_size % count:
        raise ValueError(f"`global_batch_size={global_batch_size}` must be divisible by the {count} processes.")
    return global_batch_size // count


def split_batches(dataset):
    """This process's slice of every global batch of `dataset` (static batch size), as `DataParallel` reads it."""
    info = process_info()
    if info.count == 1:
        return dataset
    import tensorflow as tf

    batch = tf.nest.flatten(dataset.element_spec)[0].shape[0]
    slices = dataset.rebatch(per_process_batch_size(batch)).shard(info.count, info.index)
    # One slice per global batch: the count `rebatch` loses, without which Keras warns that the data ran out.
    batches = int(dataset.cardinality())
    return slices.apply(tf.data.experimental.assert_cardinality(batches)) if batches >= 0 else slices


def free_port():
    """A TCP port that was free on localhost a moment ago (for a local coordinator)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]
