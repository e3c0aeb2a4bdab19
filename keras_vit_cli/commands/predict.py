"""Classify images with a pretrained ViT and print the top classes.

Images are resized bilinearly to --image-size and scaled to [-1, 1]; labels
are the ImageNet-1k names for 1000-class heads, class indices otherwise.
"""


def add_arguments(parser):
    parser.add_argument("images", nargs="+", help="image files")
    parser.add_argument(
        "--model", default="ViTB16", help="a constructor (ViTB16) or variant (B/16) (default: %(default)s)"
    )
    parser.add_argument(
        "--weights", default="imagenet", help="tag, 'imagenet', file or hf://org/repo (default: %(default)s)"
    )
    parser.add_argument("--image-size", type=int, default=224, help="square input size (default: %(default)s)")
    parser.add_argument(
        "--classes", type=int, default=1000, help="classes of the checkpoint's head (default: %(default)s)"
    )
    parser.add_argument("--top", type=int, default=5, help="how many classes to print (default: %(default)s)")


def run(args):
    import keras
    import numpy as np

    from keras_vit import validation
    from keras_vit.models import constructor_for
    from keras_vit.preprocessing import decode_predictions, load_image, preprocess_input

    validation.positive_int("top", args.top)
    size = validation.positive_int("image_size", args.image_size)
    constructor = constructor_for(args.model)
    batch = np.stack([load_image(path, (size, size)) for path in args.images]).astype("float32")
    model = constructor(weights=args.weights, input_shape=(size, size, 3), classes=args.classes)
    probabilities = keras.ops.convert_to_numpy(model(preprocess_input(batch), training=False))
    top = min(args.top, probabilities.shape[-1])
    decoded = decode_predictions(probabilities, top=top) if probabilities.shape[-1] == 1000 else None
    for row, path in enumerate(args.images):
        print(path)
        if decoded is not None:
            for wnid, name, score in decoded[row]:
                print(f"  {score:.4f}  {name} ({wnid})")
            continue
        for index in np.argsort(-probabilities[row], kind="stable")[:top]:
            print(f"  {probabilities[row, index]:.4f}  class {index}")
    return 0
