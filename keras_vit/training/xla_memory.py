"""XLA's CPU compiler scheduled for memory, not concurrency.

By default XLA's CPU compiler orders a training step's operations to run
independent ones concurrently, and keeps more intermediate buffers alive at
once for it. Its other scheduler orders them to keep fewer alive: a lower
training peak at the same speed, much lower with `remat=True`
(docs/performance.md, "Training memory, fix by fix").
`keras-vit finetune` turns it on; `schedule_xla_cpu_for_memory()` does the
same in a script. It changes nothing on a GPU or TPU, whose compilers
schedule for memory already.

XLA reads `XLA_FLAGS` once, when JAX first computes anything: call it right
after the imports, before building a model.

Example:

>>> import os
>>> from keras_vit.training import xla_memory
>>> flags = os.environ.get("XLA_FLAGS")
>>> os.environ["XLA_FLAGS"] = "--xla_dump_to=/tmp/dump"
>>> xla_memory.with_memory_schedule(os.environ["XLA_FLAGS"])
'--xla_dump_to=/tmp/dump --xla_cpu_enable_concurrency_optimized_scheduler=false'
>>> _ = os.environ.pop("XLA_FLAGS") if flags is None else os.environ.update(XLA_FLAGS=flags)
"""

import os
import sys

FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"


def with_memory_schedule(flags):
    """`flags` (an `XLA_FLAGS` value) with the memory schedule asked for, unless it already sets the flag either way.

    Args:
        flags: str, space-separated XLA flags.

    Returns:
        str, the flags to put in `XLA_FLAGS`.
    """
    if _sets_flag(flags):
        return flags  # the user's own choice stands
    return " ".join([*flags.split(), FLAG + "=false"])


def _sets_flag(flags):
    return any(word == FLAG or word.startswith(FLAG + "=") for word in flags.split())


def _jax_has_computed():
    """Whether JAX in this process has created its backends (and read `XLA_FLAGS`): only if it is imported."""
    if "jax" not in sys.modules:
        return False
    from keras_vit.utils import keras_compat

    return keras_compat.jax_backends_initialized()


def schedule_xla_cpu_for_memory(when_possible=False):
    """Asks XLA's CPU compiler to schedule for memory (in `XLA_FLAGS`), for this process and its children.

    Call it before JAX computes anything: before building a model.
    A flag the user already set either way in `XLA_FLAGS` is kept.

    Args:
        when_possible: bool. If True, a call made too late does nothing and
            returns False instead of raising (`keras-vit finetune` called
            from a Python session that has already trained: the job runs
            as it would have, with the default schedule).

    Returns:
        True when the memory schedule is asked for in `XLA_FLAGS`; False
        when the user's `XLA_FLAGS` keeps the default schedule, or (with
        `when_possible`) when the call came too late.

    Raises:
        RuntimeError: JAX has already computed in this process, so XLA has
            read its flags and the setting would not take effect (unless
            `when_possible`).
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if _sets_flag(flags):
        return FLAG + "=false" in flags.split()  # set before (by the user, or by an earlier call)
    if _jax_has_computed():
        if when_possible:
            return False
        raise RuntimeError(
            "schedule_xla_cpu_for_memory() was called after JAX had computed, when XLA has read its flags. Call it "
            f"before building a model, or start Python with XLA_FLAGS={FLAG}=false."
        )
    os.environ["XLA_FLAGS"] = with_memory_schedule(flags)
    return True
