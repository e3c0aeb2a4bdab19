"""Fine-tune a pretrained ViT on a TFDS dataset with the paper's recipe.

Command (one GPU/TPU host; CIFAR-10 is downloaded by TFDS on first use):

    KERAS_BACKEND=tensorflow python examples/finetune_official_recipe.py \
        --model ViTB16 --weights augreg_in21k --data tfds:cifar10 --image-size 384 \
        --batch-size 512 --steps 10000

Recipe (Dosovitskiy et al. 2021, Appendix B.1.1): SGD momentum 0.9, no weight
decay, global-norm clip 1.0, 500 warmup steps then cosine to 1e-5, batch 512
(reached with --accumulation-steps on smaller hardware), Inception crop +
flip for training, plain resize for evaluation, zero-initialised head, no
pre_logits.

Runtime and result to expect (not measured in this repository, which has no
accelerator in CI: these are the paper's numbers and a rough estimate): ViT-B/16
from ImageNet-21k reaches about 98.6 % CIFAR-10 test accuracy, already after
~500 steps at 384 px; 10k steps take roughly 8-10 hours on one A100 in
mixed bfloat16, about 1 hour on a TPU v3-8. CI runs this script on a tiny
image folder for a few steps on CPU.
"""

import argparse
import math

from keras_vit_cli import quiet


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ViTB16")
    parser.add_argument("--weights", default="augreg_in21k", help="'none' for random initialisation")
    parser.add_argument("--data", default="tfds:cifar10", help="tfds:NAME or an image folder root/<split>/<class>/")
    parser.add_argument("--image-size", type=int, default=384)
    parser.add_argument("--batch-size", type=int, default=512, help="global batch per optimizer update")
    parser.add_argument("--accumulation-steps", type=int, default=1, help="e.g. 8 for 512 = 8 x 64")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--warmup-steps", type=int, default=500)
    parser.add_argument("--learning-rate", type=float, default=0.01, help="0.01 for B/16 on CIFAR-10, else 0.03")
    parser.add_argument(
        "--layer-decay", type=float, default=None, help="layer-wise lr decay, e.g. 0.75 (not in the paper)"
    )
    parser.add_argument("--eval-every", type=int, default=1000)
    parser.add_argument("--out", default="outputs/official_recipe")
    args = parser.parse_args(argv)
    quiet.import_tensorflow()  # tf.data on every backend: imported here, its start-up lines silenced
    # Imported once the arguments are parsed, so that --help answers at once.
    import keras

    import keras_vit
    from keras_vit import training
    from keras_vit.training import data, distribute

    # Before JAX computes: on a CPU, XLA keeps fewer buffers alive (no-op on GPU/TPU and other backends).
    training.schedule_xla_cpu_for_memory(when_possible=True)
    keras.utils.set_random_seed(0)

    # TPUStrategy / MirroredStrategy / default, bfloat16 where supported, XLA.
    setup = distribute.configure("auto", "auto")
    batch = args.batch_size // args.accumulation_steps  # batches fed to fit
    train_source, info = data.load(args.data, "train", shuffle_files=True, seed=0)
    eval_source, eval_info = data.load(
        args.data,
        data.default_eval_split(args.data),
        class_names=None if args.data.startswith("tfds:") else info.class_names,
    )
    # Repeated: `fit` below counts the steps itself.
    train_ds = data.train_pipeline(
        train_source, image_size=args.image_size, batch_size=batch, num_classes=info.num_classes, repeat=True
    )
    # num_examples: Keras sees the end of an image folder; an unreadable file is a weight-0 row (weighted accuracy).
    eval_ds = data.eval_pipeline(
        eval_source, image_size=args.image_size, batch_size=batch, num_examples=eval_info.num_examples
    )

    with setup.scope():
        model = keras_vit.models.applications.CONSTRUCTORS[args.model](
            weights=None if args.weights.lower() == "none" else args.weights,
            input_shape=(args.image_size, args.image_size, 3),
            classes=info.num_classes,
            classifier_activation=None,
        )
        model.compile(
            optimizer=training.finetune_optimizer(
                learning_rate=args.learning_rate,
                total_steps=args.steps,
                warmup_steps=args.warmup_steps,
                accumulation_steps=args.accumulation_steps,
                layer_decay=args.layer_decay,
                model=model,
            ),
            loss=training.classification_loss(),
            weighted_metrics=["accuracy"],
            jit_compile=setup.jit_compile,
        )
    batches = args.steps * args.accumulation_steps
    steps_per_epoch = min(args.eval_every * args.accumulation_steps, batches)
    model.fit(
        train_ds,
        epochs=math.ceil(batches / steps_per_epoch),
        steps_per_epoch=steps_per_epoch,
        validation_data=eval_ds,
        # ReleaseGradients: on the torch backend, the last step's gradients out of the next step's peak memory.
        callbacks=[training.FaultTolerantBackup(f"{args.out}/backup"), training.ReleaseGradients()],
        shuffle=False,  # the pipeline shuffles (Keras would warn that it cannot)
    )
    result = model.evaluate(eval_ds, return_dict=True, verbose=0)
    training.atomic_save_model(model, f"{args.out}/model.keras")
    print(f"test accuracy: {result['accuracy']:.4f}")
    return result


if __name__ == "__main__":
    quiet.install(tensorflow=False)  # no framework log lines (KERAS_VIT_VERBOSE=1 shows them)
    main()
