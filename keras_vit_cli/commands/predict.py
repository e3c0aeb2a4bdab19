"""Classify images with a pretrained ViT and print the top classes.

Images are resized bilinearly to the model's input size and scaled to
[-1, 1]. --model is a constructor, or a saved .keras model that holds a
keras_vit ViT (nested in your model or not, e.g. `keras-vit finetune`'s
model.keras), which brings its own weights, input size and class names.
Labels are the saved class names, else the ImageNet-1k names for 1000-class
heads, else class indices; logits are turned into probabilities (softmax).
"""

from keras_vit_cli import options


def add_arguments(parser):
    parser.add_argument("images", nargs="+", help="image files")
    options.add_model(parser, "ViTB16", saved_model=True)
    options.add_weights(parser, "imagenet")
    options.add_image_size(parser, help="square input size of a constructor")
    options.add_classes(parser, help="classes of the checkpoint's head")
    parser.add_argument("--top", type=int, default=5, help="how many classes to print (default: %(default)s)")


def run(args):
    import keras
    import numpy as np

    from keras_vit.models import metadata
    from keras_vit.models.applications import constructor_for
    from keras_vit.models.preprocessing import decode_predictions, load_image, preprocess_input
    from keras_vit.utils import extras, validation

    validation.positive_int("top", args.top)
    extras.check("PIL", needed_for="keras-vit predict (reading the images)")  # before a model is built
    if args.model.endswith(".keras"):
        model = metadata.load_classifier(args.model)
        size = tuple(model.input_shape[1:3])
    else:
        image_size = validation.positive_int("image_size", args.image_size)
        constructor = constructor_for(args.model)
        model = constructor(weights=args.weights, input_shape=(image_size, image_size, 3), classes=args.classes)
        _check_trained_head(model, args)
        size = (image_size, image_size)
    batch = np.stack([load_image(path, size) for path in args.images]).astype("float32")
    outputs = keras.ops.convert_to_numpy(model(preprocess_input(batch), training=False))
    top = min(args.top, outputs.shape[-1])
    named = metadata.class_names(model) is not None
    decoded = decode_predictions(outputs, top=top) if outputs.shape[-1] == 1000 and not named else None
    rows = metadata.top_classes(model, outputs, top)
    for row, path in enumerate(args.images):
        print(path)
        if decoded is not None:
            for wnid, name, score in decoded[row]:
                print(f"  {score:.4f}  {name} ({wnid})")
            continue
        for name, probability in rows[row]:
            print(f"  {probability:.4f}  {name}")
    return 0


def _check_trained_head(model, args):
    """Refuses a model whose head the checkpoint did not provide (the loader zero-initialises a new one for other
    `classes`, or where the checkpoint has none): every image would get the same uniform scores."""
    import numpy as np

    head = next((layer for layer in model.layers if layer.name == "head"), None)
    if head is None or any(np.any(weight) for weight in head.get_weights()):
        return
    raise ValueError(
        f"--weights {args.weights} gives {args.model} no trained {args.classes}-class head (the checkpoint has a "
        "head for another number of classes, or none): its predictions would be meaningless. Pass --classes with "
        "the checkpoint's number of classes, or fine-tune it first (keras-vit finetune)."
    )
