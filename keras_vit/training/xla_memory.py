"""XLA's CPU compiler scheduled for memory, not concurrency: a lower training peak at the same speed.

GPU and TPU compilers schedule for memory already; `keras-vit finetune` turns this on.
"""

import os
import sys

FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"


def schedule_xla_cpu_for_memory(when_possible=False):
    """Asks XLA's CPU compiler to schedule for memory, in `XLA_FLAGS` (a setting there is kept), before any model.

    Args:
        when_possible: bool, whether a call made after JAX has computed returns False instead of raising.

    Returns:
        Whether the memory schedule is asked for.
    """
    words = os.environ.get("XLA_FLAGS", "").split()
    if any(word == FLAG or word.startswith(FLAG + "=") for word in words):
        return FLAG + "=false" in words
    if "jax" in sys.modules:
        from keras_vit.utils import keras_compat

        if keras_compat.jax_backends_initialized():
            if when_possible:
                return False
            raise RuntimeError(
                "schedule_xla_cpu_for_memory() was called after JAX had computed, when XLA has read its flags. Call "
                f"it before building a model, or start Python with XLA_FLAGS={FLAG}=false."
            )
    os.environ["XLA_FLAGS"] = " ".join([*words, FLAG + "=false"])
    return True
