"""The table of ViT variants: sizes, parameter counts, GFLOPs, checkpoint tags.

Prints a Markdown table; the counts are analytic (2 FLOPs per multiply-add),
so no model is built.
"""

from keras_vit_cli import options


def add_arguments(parser):
    options.add_image_size(parser)
    options.add_classes(parser)


def run(args):
    from keras_vit.models import flops, variants
    from keras_vit.pretrained import registry
    from keras_vit.utils import validation

    size = validation.positive_int("image_size", args.image_size)
    classes = validation.positive_int("classes", args.classes)
    print(
        f"| constructor | variant | patch | hidden | layers | heads | MLP | params ({classes}-class head) "
        f"| GFLOPs at {size} | weights= |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, variant in variants.VARIANTS.items():
        params = flops.parameter_count(variant, size, classes)
        gflops = flops.forward_flops(variant, size, classes) / 1e9
        tags = ", ".join(registry.available_tags(name)) or "-"
        print(
            f"| `{variants.constructor_name(name)}` | {name} | {variant['patch_size']} | {variant['hidden_dim']} | "
            f"{variant['num_layers']} | {variant['num_heads']} | {variant['mlp_dim']} | {params:,} | {gflops:.1f} "
            f"| {tags} |"
        )
    return 0
