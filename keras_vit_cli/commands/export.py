"""Export a model as a serving artefact: SavedModel, ONNX, LiteRT or OpenVINO.

MODEL is a saved .keras model (e.g. `keras-vit finetune`'s model.keras, a
keras_vit ViT nested in your model or not) or a constructor (ViTB16, B/16)
with --weights. The artefact takes a batch of RGB images with pixels in
[0, 255] (uint8, or float32 with --input-dtype), channels last, at the
model's resolution; the batch size is dynamic and the ViT scaling is inside.
Its one output is named `outputs` in every format. OUT may be an existing
folder (or end in /): the artefact is then MODEL's name + the format's suffix
inside it. An existing file is never replaced. Class names saved in the model
travel with it (for vit.tflite: vit.class_names.json beside it).
Not every backend writes every format (KERAS_BACKEND=tensorflow writes all
four); the command says so when the pair cannot work. --int8 writes a
post-training int8 artefact (litert, onnx; no calibration set needed).
"""

from keras_vit_cli import options

TENSORFLOW_ON = ("tensorflow", "jax")  # JAX exports through jax2tf


def add_arguments(parser):
    parser.add_argument("model", help="a saved .keras model, or a constructor (ViTB16) / variant (B/16)")
    parser.add_argument(
        "out", help="the artefact's path (.onnx, .tflite, .xml are added when missing), or a folder to write it into"
    )
    parser.add_argument(
        "--format", default="saved_model", help="saved_model, onnx, litert or openvino (default: %(default)s)"
    )
    parser.add_argument("--input-dtype", default="uint8", help="uint8 or float32 pixels (default: %(default)s)")
    parser.add_argument(
        "--int8", action="store_true", help="post-training int8 (litert: dynamic range; onnx: ONNX Runtime dynamic)"
    )
    options.add_weights(parser, "imagenet")
    parser.add_argument("--image-size", type=int, default=224, help="for a constructor: square input size")


def run(args):
    from keras_vit import deploy
    from keras_vit.utils import validation

    validation.one_of("format", args.format, deploy.FORMATS)
    validation.one_of("input_dtype", args.input_dtype, deploy.INPUT_DTYPES)
    if args.int8 and args.format not in deploy.INT8_FORMATS:
        raise ValueError(f"--int8 is available for the formats {deploy.INT8_FORMATS}. Received: --format {args.format}")
    if args.model.endswith(".keras"):
        model = args.model
    else:
        import inspect

        from keras_vit.models.applications import constructor_for

        constructor = constructor_for(args.model)
        size = validation.positive_int("image_size", args.image_size)
        # Before the weights are fetched and converted (minutes for a large model), not after.
        deploy.check_target(args.out, args.format, name=inspect.signature(constructor).parameters["name"].default)
        model = constructor(weights=args.weights, input_shape=(size, size, 3))
    path = deploy.export(model, args.out, format=args.format, input_dtype=args.input_dtype, int8=args.int8)
    precision = "int8" if args.int8 else "float32"
    pixels = f"(batch, height, width, 3) {args.input_dtype} pixels in [0, 255]"
    print(f"wrote {path} ({args.format}, {precision}; input: {pixels})")
    return 0
