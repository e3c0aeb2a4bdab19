"""Export a model as a serving artefact: SavedModel, ONNX, LiteRT or OpenVINO.

MODEL is a saved .keras model or a constructor (ViTB16, B/16) with --weights.
The artefact takes a batch of RGB pixels in [0, 255], channels last, and has
one output, `outputs`; saved class names travel with it. OUT may be a folder;
an existing file is never replaced. KERAS_BACKEND=tensorflow writes every format.
"""

from keras_vit_cli import options

# JAX exports through jax2tf; on torch Keras's serializer imports it to rebuild a mixed-precision model in float32.
TENSORFLOW_ON = ("tensorflow", "jax", "torch")


def add_arguments(parser):
    parser.add_argument("model", help="a saved .keras model, or a constructor (ViTB16) / variant (B/16)")
    parser.add_argument("out", help="the artefact's path (.onnx, .tflite, .xml added when missing) or a folder")
    parser.add_argument("--format", default="saved_model", help="saved_model (default), onnx, litert or openvino")
    parser.add_argument("--input-dtype", default="uint8", help="uint8 or float32 pixels (default: %(default)s)")
    parser.add_argument("--int8", action="store_true", help="post-training int8 (litert, onnx)")
    options.add_weights(parser, "imagenet")
    options.add_image_size(parser, help="for a constructor: square input size")


def run(args):
    import inspect

    from keras_vit import deploy
    from keras_vit.models.applications import constructor_for
    from keras_vit.utils import validation

    validation.one_of("format", args.format, deploy.FORMATS)
    validation.one_of("input_dtype", args.input_dtype, deploy.INPUT_DTYPES)
    if args.int8 and args.format not in deploy.INT8_FORMATS:
        raise ValueError(f"--int8 is available for the formats {deploy.INT8_FORMATS}. Received: --format {args.format}")
    model = args.model
    if not model.endswith(".keras"):
        constructor = constructor_for(args.model)
        size = validation.positive_int("image_size", args.image_size)
        # Before the weights are fetched and converted (minutes for a large model).
        deploy.check_target(args.out, args.format, name=inspect.signature(constructor).parameters["name"].default)
        model = constructor(weights=args.weights, input_shape=(size, size, 3))
    path = deploy.export(model, args.out, format=args.format, input_dtype=args.input_dtype, int8=args.int8)
    pixels = f"(batch, height, width, 3) {args.input_dtype} pixels in [0, 255]"
    print(f"wrote {path} ({args.format}, {'int8' if args.int8 else 'float32'}; input: {pixels})")
    return 0
