"""Strategy and precision selection, MirroredStrategy over two logical CPUs, keras.distribution on 4 JAX CPU devices.

Devices are configured before TensorFlow or JAX starts: the multi-device checks run in a fresh process each.
"""

import json
import os
import subprocess
import sys
import textwrap

import compute_settings
import pytest

import keras_vit
from keras_vit.training import distribute
from tests.helpers import BACKEND, REPO_ROOT

_TINY = "dict(patch_size=4, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, input_shape=(8, 8, 3), classes=4)"


def _run(script, tmp_path, env):
    path = tmp_path / "check.py"
    path.write_text(textwrap.dedent(script))
    full_env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2", **env)
    result = subprocess.run(
        [sys.executable, str(path)], cwd=str(tmp_path), env=full_env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_configure_on_this_machine_is_single_device_float32():
    assert distribute.select_precision("auto", "tpu") == "mixed_bfloat16"
    assert distribute.select_precision("mixed_float16", "cpu") == "mixed_float16"
    setup = distribute.configure("default" if BACKEND == "tensorflow" else "auto", "auto")
    assert (setup.precision, setup.device, setup.num_replicas) == ("float32", "cpu", 1)
    assert setup.global_batch_size(32) == 32
    assert setup.scale_learning_rate(0.03, 256) == pytest.approx(0.015)
    with setup.scope():
        keras_vit.VisionTransformer(**eval(_TINY))
    bad = [dict(strategy="multiworker"), dict(precision="float64")]
    if BACKEND != "tensorflow":
        bad.append(dict(strategy="mirrored"))
    for arguments in bad:
        with pytest.raises(ValueError, match=next(iter(arguments.values()))):
            distribute.configure(**arguments)
    assert distribute.replicas_for(64, 4) == 16
    with pytest.raises(ValueError, match="30"):
        distribute.replicas_for(30, 4)


_MIRRORED = """
import json, os
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras, numpy as np
import keras_vit
from keras_vit import training
from keras_vit.training import distribute
from keras_vit.training import layer_decay

rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, (16, 8, 8, 3)).astype("float32")
y = rng.integers(0, 4, 16)

def build():
    return keras_vit.VisionTransformer(**{tiny}, classifier_activation=None)

keras.utils.set_random_seed(0)
reference = build()
# A non-zero head, saved as a local "pretrained" checkpoint.
reference.get_layer("head").kernel.assign(rng.normal(size=(16, 4)).astype("float32") * 0.1)
reference.save_weights("pretrained.weights.h5")

def train(model, jit):
    # Layer-wise decay too: its per-variable rates must find each replica's copy.
    multipliers = layer_decay.layer_decay_multipliers(model, 0.5)
    model.compile(layer_decay.LayerwiseSGD(0.1, momentum=0.9, learning_rate_multipliers=multipliers),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=jit)
    history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    return history.history["loss"], [np.asarray(w) for w in model.get_weights()]

single = build()
single.load_weights("pretrained.weights.h5")
single_loss, single_weights = train(single, False)

setup = distribute.configure("mirrored", "float32")
with setup.scope():
    mirrored = build()
    mirrored.load_weights("pretrained.weights.h5")  # pretrained weights load inside the scope
    loaded_ok = all(np.allclose(a, np.asarray(b)) for a, b in zip(reference.get_weights(), mirrored.get_weights()))
    mirrored_loss, mirrored_weights = train(mirrored, setup.jit_compile)
weight_diff = max(float(np.abs(a - b).max()) for a, b in zip(single_weights, mirrored_weights))
mirrored.save("mirrored.keras")

# Reload outside the strategy.
revived = keras.saving.load_model("mirrored.keras")
reload_diff = float(np.abs(np.asarray(revived(x)) - np.asarray(mirrored(x))).max())

keras.config.set_dtype_policy("mixed_bfloat16")
with setup.strategy.scope():
    bf16 = build()
    bf16.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    bf16_loss = bf16.fit(x, y, batch_size=8, epochs=1, verbose=0).history["loss"]
bf16_dtypes = [bf16.get_layer("encoder_block_0").compute_dtype, bf16.get_layer("encoder_block_0").variable_dtype,
               keras.backend.standardize_dtype(bf16(x[:2]).dtype)]

print(json.dumps(dict(replicas=setup.num_replicas, jit=setup.jit_compile, loaded_ok=bool(loaded_ok),
                      single_loss=single_loss, mirrored_loss=mirrored_loss, weight_diff=weight_diff,
                      reload_diff=reload_diff, bf16_loss=bf16_loss, bf16_dtypes=bf16_dtypes)))
"""


@pytest.mark.skipif(BACKEND != "tensorflow", reason="tf.distribute needs the tensorflow backend")
def test_mirrored_strategy_matches_single_device(tmp_path):
    result = _run(_MIRRORED.replace("{tiny}", _TINY), tmp_path, {"KERAS_BACKEND": "tensorflow"})
    # XLA cannot reach a mirrored variable on another device: configure turns it off.
    assert result["replicas"] == 2 and result["jit"] is False
    assert result["loaded_ok"]
    for a, b in zip(result["single_loss"], result["mirrored_loss"]):
        assert a == pytest.approx(b, abs=1e-5)
    assert result["weight_diff"] < 1e-5
    assert result["reload_diff"] < 1e-6
    assert all(v == v and v < 10 for v in result["bf16_loss"])  # finite
    assert result["bf16_dtypes"] == ["bfloat16", "float32", "float32"]  # head and softmax stay float32


_JAX = """
import json
import jax, keras, numpy as np
import keras_vit
from keras_vit.training import distribute
from keras_vit.utils import keras_compat

assert jax.device_count() == 4, jax.devices()
rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, (8, 8, 8, 3)).astype("float32")
y = rng.integers(0, 4, 8)

def build():
    return keras_vit.VisionTransformer(**{tiny}, classifier_activation=None)

keras_compat.set_random_seed(0)  # Keras's own imports TensorFlow: 3-4 s of this process
single = build()
single.get_layer("head").kernel.assign(rng.normal(size=(16, 4)).astype("float32") * 0.1)
initial = single.get_weights()
single_out = np.asarray(single(x))

def step(model):
    model.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    loss = model.train_on_batch(x, y)
    return float(loss), model.get_weights()

single_loss, single_weights = step(single)

with keras.distribution.DataParallel().scope():
    dp = build()
    dp.set_weights(initial)
    dp_loss, dp_weights = step(dp)
dp_diff = max(float(np.abs(a - b).max()) for a, b in zip(single_weights, dp_weights))

with distribute.model_parallel(model_shards=2).scope():
    mp = build()
    mp.set_weights(initial)
    specs = {{v.path: list(v.value.sharding.spec) for v in mp.variables}}
    mp_out = np.asarray(mp(x))
    mp_loss, mp_weights = step(mp)
mp_diff = max(float(np.abs(a - b).max()) for a, b in zip(single_weights, mp_weights))
print(json.dumps(dict(single_loss=single_loss, dp_loss=dp_loss, dp_diff=dp_diff, specs=specs,
                      out_diff=float(np.abs(mp_out - single_out).max()), mp_loss=mp_loss, mp_diff=mp_diff)))
"""


@pytest.mark.skipif(BACKEND != "jax", reason="keras.distribution runs on the jax backend")
def test_jax_data_and_model_parallel_match_single_device(tmp_path):
    script = _JAX.replace("{tiny}", _TINY).replace("{{", "{").replace("}}", "}")
    # Four CPU devices, and the suite's fast compiles (tests/conftest.py), which a replaced XLA_FLAGS would drop.
    flags = compute_settings.with_fast_compile("--xla_force_host_platform_device_count=4")
    result = _run(script, tmp_path, {"KERAS_BACKEND": "jax", "XLA_FLAGS": flags})
    assert result["dp_loss"] == pytest.approx(result["single_loss"], abs=1e-5)
    assert result["dp_diff"] < 1e-5
    specs = result["specs"]
    assert specs["encoder_block_0/attention/qkv/kernel"] == [None, "model"]
    assert specs["encoder_block_0/attention/output/kernel"] == ["model", None]
    assert specs["encoder_block_0/mlp/fc1/kernel"] == [None, "model"]
    assert specs["encoder_block_0/mlp/fc2/kernel"] == ["model", None]
    replicated = [path for path, spec in specs.items() if all(axis is None for axis in spec)]
    assert len(replicated) == len(specs) - 4  # everything else is replicated
    assert "position_embedding/embedding" in replicated and "head/kernel" in replicated
    assert result["out_diff"] < 1e-5
    assert result["mp_loss"] == pytest.approx(result["single_loss"], abs=1e-5)
    assert result["mp_diff"] < 1e-5
