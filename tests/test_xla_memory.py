"""XLA's CPU scheduler for memory: the flag added once, the user's own choice kept, a call too late refused."""

import os
import subprocess
import sys

import keras
import pytest

from keras_vit.training import xla_memory

FLAG = xla_memory.FLAG


def test_the_flag_is_added_once_and_a_users_setting_stands(monkeypatch):
    from keras_vit.utils import keras_compat

    monkeypatch.setattr(keras_compat, "jax_backends_initialized", lambda: False)  # as in a fresh process
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    for _ in range(2):
        assert xla_memory.schedule_xla_cpu_for_memory() is True
        assert os.environ["XLA_FLAGS"] == f"--xla_dump_to=/tmp/x {FLAG}=false"
    # The user's own setting stands, even after JAX has computed (on the jax run).
    monkeypatch.undo()
    keras.ops.convert_to_numpy(keras.ops.ones(2))
    monkeypatch.setenv("XLA_FLAGS", f"--xla_dump_to=/tmp/x {FLAG}=true")
    assert xla_memory.schedule_xla_cpu_for_memory() is False
    assert os.environ["XLA_FLAGS"] == f"--xla_dump_to=/tmp/x {FLAG}=true"


# In a fresh JAX process: XLA aborts on a flag it does not know, so a step that trains proves the flag's name is
# current; the second script calls it after JAX has computed.
TRAIN_AFTER = """
import numpy as np, keras_vit
from keras_vit.training import xla_memory
assert xla_memory.schedule_xla_cpu_for_memory()
model = keras_vit.VisionTransformer(patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32,
                                    input_shape=(16, 16, 3), classes=2, remat=True)
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
print("loss", model.train_on_batch(np.zeros((2, 16, 16, 3)), np.zeros((2,))))
assert xla_memory.schedule_xla_cpu_for_memory()  # again: already set, nothing to refuse
"""
TOO_LATE = """
import keras_vit
keras_vit.VisionTransformer(patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32,
                            input_shape=(16, 16, 3), classes=2)
from keras_vit.training import xla_memory
assert xla_memory.schedule_xla_cpu_for_memory(when_possible=True) is False  # as `keras-vit finetune` asks
xla_memory.schedule_xla_cpu_for_memory()
"""


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX's XLA: the jax run")
def test_in_a_fresh_jax_process_the_flag_is_accepted_and_a_late_call_refused():
    environment = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    environment["KERAS_BACKEND"] = "jax"
    trained = subprocess.run([sys.executable, "-c", TRAIN_AFTER], env=environment, capture_output=True, text=True)
    assert trained.returncode == 0 and "loss" in trained.stdout, trained.stderr[-2000:]
    late = subprocess.run([sys.executable, "-c", TOO_LATE], env=environment, capture_output=True, text=True)
    assert late.returncode == 1
    assert "called after JAX had computed" in late.stderr and f"XLA_FLAGS={FLAG}=false" in late.stderr
