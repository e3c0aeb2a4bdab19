"""Export a model as a serving artefact: SavedModel, ONNX, LiteRT or OpenVINO.

MODEL is a saved .keras model or a constructor (ViTB16, B/16) with --weights.
The artefact takes a batch of RGB pixels in [0, 255], channels last (a NaFlex
model's: its float32 patches, int32 spatial_shapes and bool mask at its fixed
length), and has one output, `outputs`; saved class names travel with it. OUT
may be a folder; an existing file is never replaced. KERAS_BACKEND=tensorflow
writes every format.
"""

from keras_vit_cli import options

# JAX exports through jax2tf; on torch Keras's serializer imports it to rebuild a mixed-precision model in float32.
TENSORFLOW_ON = ("tensorflow", "jax", "torch")


def add_arguments(parser):
    parser.add_argument("model", help="a saved .keras model, or a constructor (ViTB16) / variant (B/16)")
    parser.add_argument("out", help="the artefact's path (.onnx, .tflite, .xml added when missing) or a folder")
    parser.add_argument("--format", default="saved_model", help="saved_model (default), onnx, litert or openvino")
    parser.add_argument("--input-dtype", help="uint8 (default) or float32 pixels; a NaFlex model's patches: float32")
    parser.add_argument("--int8", action="store_true", help="post-training int8 (litert, onnx)")
    options.add_weights(parser, "imagenet")
    options.add_image_size(parser, help="for a constructor: square input size")


def run(args):
    import inspect
    import os

    from keras_vit import deploy
    from keras_vit.models import metadata
    from keras_vit.models.applications import constructor_for
    from keras_vit.utils import validation

    validation.one_of("format", args.format, deploy.FORMATS)
    if args.int8 and args.format not in deploy.INT8_FORMATS:
        raise ValueError(f"--int8 is available for the formats {deploy.INT8_FORMATS}. Received: --format {args.format}")
    # The arguments, packages and target are checked before the model loads (a constructor's weights: minutes).
    deploy.check_arguments(args.format, args.input_dtype, args.int8)
    if args.model.endswith(".keras"):
        path = deploy.check_target(args.out, args.format, name=os.path.splitext(os.path.basename(args.model))[0])
        model = metadata.load_classifier(args.model)
    else:
        constructor = constructor_for(args.model)
        size = validation.positive_int("image_size", args.image_size)
        path = deploy.check_target(
            args.out, args.format, name=inspect.signature(constructor).parameters["name"].default
        )
        model = constructor(weights=args.weights, input_shape=(size, size, 3))
    path = deploy.export(model, path, format=args.format, input_dtype=args.input_dtype, int8=args.int8)
    if deploy.is_naflex(model):
        inputs = ", ".join(f"{name} {tuple(x.shape)} {x.dtype}" for name, x in model.input.items())
    else:
        inputs = f"(batch, height, width, 3) {args.input_dtype or 'uint8'} pixels in [0, 255]"
    print(f"wrote {path} ({args.format}, {'int8' if args.int8 else 'float32'}; input: {inputs})")
    return 0
