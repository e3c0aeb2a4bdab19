"""Data- and model-parallel ViT training on all local accelerators.

Commands:

    # TensorFlow: TPUStrategy on a TPU VM, MirroredStrategy over the local GPUs
    KERAS_BACKEND=tensorflow python examples/distributed_training.py --model ViTB16 --data tfds:cifar10

    # JAX: keras.distribution data parallelism over every device (also across
    # hosts: run the same command on each host after jax.distributed.initialize())
    KERAS_BACKEND=jax python examples/distributed_training.py --model ViTL16 --data tfds:cifar10

    # JAX: shard attention and MLP kernels over 4 devices (large variants)
    KERAS_BACKEND=jax python examples/distributed_training.py --model ViTH14 --model-shards 4

Keras 3 does not support tf.distribute.MultiWorkerMirroredStrategy
(keras-team/keras issue 20585): across hosts use the JAX backend (this script
with --model-shards as needed) or a TPU pod slice with TPUStrategy.

The global batch is --per-replica-batch x replicas. The optimizer is the
pre-training recipe (`training.pretrain_optimizer`: AdamW, weight decay 0.1,
linear warmup over 10 % of the steps, then linear decay) at a learning rate
of 1e-3 for a global batch of 4096, scaled linearly to the actual global
batch (`Setup.scale_learning_rate`); the loss has label smoothing 0.1.

Runtime and result to expect (an estimate, not measured here: CI has no
accelerator): ViT-B/16 from scratch on CIFAR-10 at 224 px reaches ~80 % in
a few hours on 8 GPUs; ViTs need pretraining (see finetune_official_recipe.py)
for the paper's numbers. CI runs this script on a tiny folder on CPU.
"""

import argparse

from keras_vit_cli import quiet


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ViTB16")
    parser.add_argument("--data", default="tfds:cifar10")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--per-replica-batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--model-shards", type=int, default=1, help="JAX: devices each kernel is split over")
    parser.add_argument("--precision", default="auto", help="auto, float32, mixed_bfloat16 or mixed_float16")
    args = parser.parse_args(argv)
    quiet.import_tensorflow()  # tf.data on every backend: imported here, its start-up lines silenced
    # Imported once the arguments are parsed, so that --help answers at once.
    import keras

    import keras_vit
    from keras_vit import training
    from keras_vit.training import data, distribute

    keras.utils.set_random_seed(0)

    setup = distribute.configure("auto", args.precision)
    if keras.backend.backend() == "jax" and args.model_shards > 1:
        # Replaces the DataParallel distribution configure() set.
        keras.distribution.set_distribution(distribute.model_parallel(args.model_shards))
        setup.num_replicas = len(keras.distribution.list_devices()) // args.model_shards
    global_batch = setup.global_batch_size(args.per_replica_batch)
    print(
        f"backend {keras.backend.backend()}, {setup.num_replicas} replica(s), global batch {global_batch}, "
        f"{setup.precision}, jit_compile={setup.jit_compile}"
    )

    train_source, info = data.load(args.data, "train")
    # Each host reads its own shard when there are several (JAX multi-host).
    shard = None
    if keras.backend.backend() == "jax":
        import jax

        if jax.process_count() > 1:
            shard = (jax.process_count(), jax.process_index())
            global_batch //= jax.process_count()
    train_ds = data.train_pipeline(
        train_source,
        image_size=args.image_size,
        batch_size=global_batch,
        num_classes=info.num_classes,
        shard=shard,
        repeat=True,  # fit counts the steps
    )
    with setup.scope():
        model = keras_vit.models.applications.CONSTRUCTORS[args.model](
            input_shape=(args.image_size, args.image_size, 3), classes=info.num_classes, classifier_activation=None
        )
        model.compile(
            optimizer=training.pretrain_optimizer(
                learning_rate=setup.scale_learning_rate(1e-3, args.per_replica_batch, reference_batch_size=4096),
                total_steps=args.steps,
                warmup_steps=max(1, args.steps // 10),
            ),
            loss=training.classification_loss(label_smoothing=0.1),
            metrics=["accuracy"],
            jit_compile=setup.jit_compile,
        )
    # shuffle=False: the pipeline shuffles (Keras would warn that it cannot).
    history = model.fit(train_ds, epochs=1, steps_per_epoch=args.steps, shuffle=False)
    return history.history


if __name__ == "__main__":
    quiet.install(tensorflow=False)  # no framework log lines (KERAS_VIT_VERBOSE=1 shows them)
    main()
