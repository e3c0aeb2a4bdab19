"""The table of ViT variants: sizes, parameter counts, GFLOPs.

Prints a Markdown table (as in the README): the architecture, the parameter
count of the model the constructor builds and the forward-pass GFLOPs
(2 per multiply-add) of one image, both counted analytically
(`keras_vit.models.flops`): no model is built and no framework is imported,
so the table comes at once.
"""

from keras_vit_cli import keras_free, options

USES_KERAS = False
TENSORFLOW_ON = ()


def add_arguments(parser):
    options.add_image_size(parser)
    options.add_classes(parser)


def run(args):
    variants, flops, validation = keras_free.load(
        "keras_vit.models.variants", "keras_vit.models.flops", "keras_vit.utils.validation"
    )
    validation.positive_int("image_size", args.image_size)
    validation.positive_int("classes", args.classes)
    print(
        f"| constructor | variant | patch | hidden | layers | heads | MLP | params ({args.classes}-class head) "
        f"| GFLOPs at {args.image_size} |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, variant in variants.VARIANTS.items():
        # The hybrids' ResNet convolutions included in both counts.
        params = flops.parameter_count(variant, args.image_size, args.classes)
        gflops = f"{flops.forward_flops(variant, args.image_size, args.classes) / 1e9:.1f}"
        print(
            f"| `{variants.constructor_name(name)}` | {name} | {variant['patch_size']} | {variant['hidden_dim']} | "
            f"{variant['num_layers']} | {variant['num_heads']} | {variant['mlp_dim']} | {params:,} | {gflops} |"
        )
    return 0
