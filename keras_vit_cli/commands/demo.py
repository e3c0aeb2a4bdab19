"""Build a random-weight ViT and time a forward pass on a random batch.

Prints the backend, the parameter count, the shapes and how long the first
forward pass (which includes tracing) and the second one took.
"""

import sys
import time

from keras_vit_cli import options


def add_arguments(parser):
    options.add_model(parser, "ViTTi16")
    parser.add_argument("--batch-size", type=int, default=2, help="images per batch (default: %(default)s)")
    options.add_image_size(parser)
    options.add_classes(parser)
    parser.add_argument("--seed", type=int, default=0, help="seed for the weights and the images")


def run(args):
    import keras
    import numpy as np

    from keras_vit.models.applications import constructor_for
    from keras_vit.models.preprocessing import preprocess_input
    from keras_vit.utils import keras_compat, validation

    constructor = constructor_for(args.model)
    for name in ("batch_size", "image_size", "classes"):
        validation.positive_int(name, getattr(args, name))
    keras_compat.set_random_seed(args.seed)
    size = args.image_size
    model = constructor(weights=None, input_shape=(size, size, 3), classes=args.classes)
    pixels = np.random.default_rng(args.seed).integers(0, 256, size=(args.batch_size, size, size, 3))
    images = preprocess_input(pixels)
    timings = []
    for _ in range(2):
        start = time.perf_counter()
        outputs = keras.ops.convert_to_numpy(model(images, training=False))
        timings.append(time.perf_counter() - start)

    print(f"backend:       {keras.backend.backend()}")
    print(f"model:         {constructor.__name__} ({model.name}), random weights")
    print(f"parameters:    {model.count_params():,}")
    print(f"input shape:   {tuple(images.shape)}")
    print(f"output shape:  {tuple(outputs.shape)}")
    print(f"forward pass:  {timings[0]:.3f} s first call (includes tracing), {timings[1]:.3f} s second call")
    if not np.all(np.isfinite(outputs)):
        print("keras-vit demo: the outputs are not all finite", file=sys.stderr)
        return 1
    return 0
