"""The table of ViT variants: sizes, parameter counts, GFLOPs.

Prints a Markdown table (as in the README): the architecture, the parameter
count of the model as built, and the analytic forward-pass GFLOPs (2 per
multiply-add) of one image.
"""

from keras_vit_cli import options


def add_arguments(parser):
    options.add_image_size(parser)
    options.add_classes(parser)


def run(args):
    import keras

    import keras_vit
    from keras_vit.models.applications import constructor_for
    from keras_vit.models.flops import forward_flops
    from keras_vit.utils import validation

    validation.positive_int("image_size", args.image_size)
    validation.positive_int("classes", args.classes)
    print(
        f"| constructor | variant | patch | hidden | layers | heads | MLP | params ({args.classes}-class head) "
        f"| GFLOPs at {args.image_size} |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in keras_vit.CONSTRUCTORS:
        constructor = constructor_for(name)
        variant = keras_vit.VARIANTS[constructor.variant]
        model = constructor(input_shape=(args.image_size, args.image_size, 3), classes=args.classes)
        # The analytic count: the hybrids' ResNet convolutions included.
        gflops = f"{forward_flops(variant, args.image_size, args.classes) / 1e9:.1f}"
        print(
            f"| `{name}` | {constructor.variant} | {variant['patch_size']} | {variant['hidden_dim']} | "
            f"{variant['num_layers']} | {variant['num_heads']} | {variant['mlp_dim']} | "
            f"{model.count_params():,} | {gflops} |"
        )
        del model
        keras.backend.clear_session()
    return 0
