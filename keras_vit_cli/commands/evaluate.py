"""Evaluate what a ViT has learned: linear few-shot, linear probe, k-NN, and its head.

MODEL is a saved .keras model or a constructor (ViTB16, B/16) with --weights;
a NaFlex model (a saved one, or --naflex) reads each image at its own aspect ratio.
Prints one table and writes metrics.json, fewshot.png and confusion_matrix.png
to --out. The default data is scikit-learn's digits, split as `finetune` does.
"""

import sys

from keras_vit_cli import options

TENSORFLOW_ON = ("tensorflow", "jax", "torch")  # tf.data reads the images on every backend


def add_arguments(parser):
    parser.add_argument("model", help="a saved .keras model, or a constructor (ViTB16) or variant (B/16)")
    options.add_weights(parser)
    parser.add_argument("--reinitialize", action="store_true", help="fresh random weights (a baseline)")
    parser.add_argument("--data", default="digits", help="digits, tfds:NAME or an image folder (default: digits)")
    parser.add_argument("--train-split", default="train", help="the split the shots come from (default: train)")
    parser.add_argument("--test-split", default=None, help="the split measured (default: validation, val or test)")
    parser.add_argument("--data-dir", default=None, help="TFDS data directory (default: TFDS's own)")
    parser.add_argument("--image-size", type=int, default=None, help="square input size (default: the model's)")
    options.add_naflex(parser)
    parser.add_argument("--batch-size", type=int, default=64, help="images per forward pass (default: %(default)s)")
    parser.add_argument("--shots", default="1,5,10,25", help="comma-separated shot counts (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=3, help="random draws per shot count (default: %(default)s)")
    parser.add_argument("--l2", type=float, default=2.0**10, help="few-shot L2 strength (default: 1024)")
    parser.add_argument("--select-l2", action="store_true", help="choose the L2 per draw on held-out images")
    parser.add_argument("--k", type=int, default=20, help="k-NN neighbours (default: %(default)s)")
    parser.add_argument("--temperature", type=float, default=0.07, help="k-NN vote temperature (default: %(default)s)")
    parser.add_argument("--cache", default=None, help="folder to keep the features in and reuse (default: none)")
    parser.add_argument("--out", default="outputs/evaluate", help="output folder (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws and splits (default: %(default)s)")
    parser.add_argument("--verbose", type=int, choices=(0, 1), help="1: progress bars (default on a terminal)")


def _shots(text):
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise ValueError(f"--shots must be positive integers separated by commas, e.g. 1,5,10,25. Received: {text!r}")
    return tuple(int(part) for part in parts)


def run(args):
    import keras

    from keras_vit import evaluation
    from keras_vit.models.vit import find_vit
    from keras_vit.training import data, finetune
    from keras_vit.utils import extras, files, validation

    # Before a model is built or data read.
    data.check_dependencies(args.data)
    files.check_output_folder(args.out)
    extras.check("matplotlib", needed_for="keras-vit evaluate's figures", extra="inspect")
    shots = _shots(args.shots)
    for name in ("batch_size", "seeds", "k"):
        validation.positive_int(name, getattr(args, name))
    if args.image_size is not None:
        validation.positive_int("image_size", args.image_size)
    validation.finite_float("l2", args.l2, minimum=0, include_minimum=False)
    validation.finite_float("temperature", args.temperature, minimum=0, include_minimum=False)
    model = options.load_model(args.model, args.weights, args.image_size, args.naflex)
    if args.reinitialize:
        keras.utils.set_random_seed(args.seed)
        # Rebuilt from its config, freshly initialised (`clone_model` would flatten a VisionTransformer).
        model = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(model))
    find_vit(model)  # not a keras_vit model: fail before reading any data
    if args.data == "digits":
        train, test = finetune.digits_sources(args.seed)
    else:
        train, test = data.load_splits(
            args.data, args.train_split, args.test_split, data_dir=args.data_dir, seed=args.seed
        )
    verbose = int(sys.stdout.isatty()) if args.verbose is None else args.verbose  # no progress bar in a log file
    extraction = dict(image_size=args.image_size, batch_size=args.batch_size, cache_dir=args.cache, verbose=verbose)
    settings = dict(shots=shots, seeds=args.seeds, l2=args.l2, k=args.k, temperature=args.temperature, seed=args.seed)
    metrics = evaluation.evaluate(model, train, test, l2_grid=args.select_l2 or None, **extraction, **settings)
    metrics.update(model=args.model, weights=args.weights, reinitialized=args.reinitialize, data=args.data)
    paths = evaluation.write_results(metrics, args.out)
    print(
        f"{args.model}{' (re-initialised)' if args.reinitialize else ''} on {args.data}: "
        f"{metrics['train_examples']} training / {metrics['test_examples']} test images, "
        f"representation {metrics['representation']} ({metrics['feature_dim']} features)"
    )
    print(evaluation.format_table(metrics))
    print(f"wrote {', '.join(paths[name] for name in sorted(paths))}")
    return 0
