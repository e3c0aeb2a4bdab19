"""Classify images with a pretrained ViT and print the top classes.

--model is a constructor, or a saved .keras model (e.g. `keras-vit finetune`'s
model.keras) with its own weights, input size and class names. A NaFlex model
(a saved one, or --naflex) reads each image at its own aspect ratio.
"""

from keras_vit_cli import options


def add_arguments(parser):
    parser.add_argument("images", nargs="+", help="image files")
    options.add_model(parser, "ViTB16", saved_model=True)
    options.add_weights(parser, "imagenet")
    options.add_image_size(parser, None, "square input size of a constructor", shown="224")
    options.add_naflex(parser)
    options.add_classes(parser, help="classes of the checkpoint's head")
    parser.add_argument("--top", type=int, default=5, help="how many classes to print (default: %(default)s)")


def run(args):
    import keras
    import numpy as np

    from keras_vit import NaFlexPatches
    from keras_vit.models import find_vit, metadata
    from keras_vit.models.preprocessing import decode_predictions, load_image, preprocess_input
    from keras_vit.utils import extras, validation

    validation.positive_int("top", args.top)
    extras.check("PIL", needed_for="keras-vit predict (reading the images)")
    image_size = 224 if args.image_size is None and args.naflex is None else args.image_size
    model = options.load_model(args.model, args.weights, image_size, args.naflex, classes=args.classes)
    head = next((layer for layer in model.layers if layer.name == "head"), None)
    # A head the checkpoint did not provide is zero-initialised: every image would get the same scores.
    trained = args.model.endswith(".keras") or head is None or any(np.any(weight) for weight in head.get_weights())
    if not trained:
        raise ValueError(
            f"--weights {args.weights} gives {args.model} no trained {args.classes}-class head: its predictions would "
            "be meaningless. Pass --classes with the checkpoint's number of classes, or fine-tune it "
            "(keras-vit finetune)."
        )
    backbone = find_vit(model)
    if backbone.max_num_patches is None:
        size = tuple(model.input_shape[1:3])
        batch = np.stack([load_image(path, size) for path in args.images]).astype("float32")
    else:
        # Each image at its own size and aspect ratio, cut as the model was trained.
        cut = NaFlexPatches(backbone.patch_size, backbone.max_num_patches)
        dicts = [cut(load_image(path, None).astype("float32")) for path in args.images]
        batch = {key: np.concatenate([keras.ops.convert_to_numpy(d[key]) for d in dicts]) for key in dicts[0]}
    outputs = keras.ops.convert_to_numpy(model(preprocess_input(batch), training=False))
    top = min(args.top, outputs.shape[-1])
    if outputs.shape[-1] == 1000 and metadata.class_names(model) is None:
        rows = [[(f"{name} ({wnid})", score) for wnid, name, score in row] for row in decode_predictions(outputs, top)]
    else:
        rows = metadata.top_classes(model, outputs, top)
    for path, row in zip(args.images, rows):
        print(path)
        for name, probability in row:
            print(f"  {probability:.4f}  {name}")
    return 0
