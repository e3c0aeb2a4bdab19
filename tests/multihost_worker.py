"""One process of the two-process training check of `test_multihost.py`: `python tests/multihost_worker.py OUT STEPS
[die]`, with its rank's `KERAS_DISTRIBUTION_*` settings in the environment.

Trains the tiny ViT for STEPS global steps (global batch 8, the official fine-tune optimizer) on this process's shard;
process 0 writes the initial and trained weights to OUT; every process prints one JSON line of what it saw. With
`die`, process 1 then kills itself and process 0 waits at a barrier, which JAX's heartbeat must break.
"""

import json
import os
import signal
import sys

import numpy as np

GLOBAL_BATCH = 8
TINY = dict(patch_size=4, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, input_shape=(8, 8, 3), classes=4)


def dataset_arrays(steps):
    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, (GLOBAL_BATCH * steps, 8, 8, 3)).astype("float32")
    labels = rng.integers(0, 4, GLOBAL_BATCH * steps).astype("int32")
    return images, labels


def build_and_compile(steps):
    import keras

    import keras_vit
    from keras_vit import training

    model = keras_vit.VisionTransformer(**TINY, classifier_activation=None)
    optimizer = training.finetune_optimizer(learning_rate=0.1, total_steps=steps, warmup_steps=1)
    model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    return model


def main(out, steps, die):
    from keras_vit.training import multihost

    info = multihost.initialize(seed=0, heartbeat_timeout=5)
    import tensorflow as tf

    from keras_vit.training import distribute

    setup = distribute.configure("auto", "float32")
    model = build_and_compile(steps)
    # A non-zero head, so that every weight gets a gradient from the first step.
    head = model.get_layer("head").kernel
    head.assign(np.random.default_rng(1).normal(size=head.shape).astype("float32") * 0.1)
    initial = [np.asarray(w) for w in model.get_weights()]
    multihost.run_on_primary(lambda: np.savez(os.path.join(out, "initial.npz"), *initial), "write the initial weights")

    images, labels = dataset_arrays(steps)
    shard = multihost.data_shard()
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).shard(*shard)
    dataset = dataset.batch(multihost.per_process_batch_size(GLOBAL_BATCH), drop_remainder=True)
    history = model.fit(dataset, epochs=1, steps_per_epoch=steps, shuffle=False, verbose=0)
    trained = [np.asarray(w) for w in model.get_weights()]
    multihost.run_on_primary(lambda: np.savez(os.path.join(out, "trained.npz"), *trained), "write the weights")
    report = dict(
        process=info.index,
        processes=info.count,
        replicas=setup.num_replicas,
        iterations=int(np.asarray(model.optimizer.iterations)),
        loss=history.history["loss"][-1],
        weight_sum=float(sum(np.sum(w, dtype=np.float64) for w in trained)),
    )
    print(json.dumps(report), flush=True)
    if die:
        if info.index == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("the peer is dead")  # never passes: JAX's heartbeat ends this process
        print("passed the barrier", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), len(sys.argv) > 3 and sys.argv[3] == "die")
