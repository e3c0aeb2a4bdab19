"""Options several `keras-vit` commands share, spelled once.

>>> parser = argparse.ArgumentParser()
>>> add_weights(parser)
>>> parser.parse_args([]).weights is None and parser.parse_args(["--weights", "None"]).weights is None
True
"""

import argparse

WEIGHTS_HELP = "a checkpoint tag, 'imagenet', a file or folder, hf://org/repo, an https URL, or 'none' (random weights)"


def weights_value(text):
    """A `--weights` value as the constructors take it: `none` (any case) is `None`, random weights."""
    return None if text.strip().lower() == "none" else text


def add_weights(parser, default="none"):
    """`--weights`: the same values for every command."""
    parser.add_argument("--weights", type=weights_value, default=default, help=f"{WEIGHTS_HELP} (default: %(default)s)")


def add_model(parser, default, saved_model=False):
    """`--model`: a constructor (`ViTB16`) or variant (`B/16`), or also a saved `.keras` model."""
    what = "a constructor (ViTB16), a variant (B/16)" + (" or a saved .keras model" if saved_model else "")
    parser.add_argument("--model", default=default, help=f"{what} (default: %(default)s)")


def add_naflex(parser):
    """`--naflex`: a NaFlex model (`max_num_patches`), as `keras-vit finetune --naflex` trains one."""
    parser.add_argument(
        "--naflex",
        type=int,
        metavar="MAX_PATCHES",
        help="NaFlex input: each image keeps its aspect ratio, at most MAX_PATCHES patches; not with --image-size "
        "(default: a saved NaFlex model's own, else off)",
    )


def load_model(name, weights=None, image_size=None, naflex=None, **kwargs):
    """`--model`'s model: a saved `.keras` model, or the constructor `name` with `weights` and a square `image_size`,
    or as a NaFlex model of at most `naflex` patches."""
    from keras_vit.models import find_vit, metadata
    from keras_vit.models.applications import constructor_for
    from keras_vit.utils import validation

    if naflex is not None and image_size is not None:
        raise ValueError(
            f"--image-size has no meaning with --naflex: each image keeps its own size. Received: {image_size}"
        )
    if name.endswith(".keras"):
        model = metadata.load_classifier(name)
        own = find_vit(model).max_num_patches
        if naflex not in (None, own):
            raise ValueError(
                f"{name} takes {'images' if own is None else f'NaFlex input of {own} patches'}, as it was saved: "
                f"leave out --naflex {naflex}."
            )
        return model
    try:
        constructor = constructor_for(name)
    except ValueError as error:
        raise ValueError(f"{error} A saved model is named by its .keras path.") from None
    if naflex is not None:
        kwargs.update(input_shape=(None, None, 3), max_num_patches=validation.positive_int("naflex", naflex))
    if image_size is not None:
        size = validation.positive_int("image_size", image_size)
        kwargs["input_shape"] = (size, size, 3)
    return constructor(weights=weights, **kwargs)


def add_image_size(parser, default=224, help="square image side in pixels", shown="%(default)s"):
    parser.add_argument("--image-size", type=int, default=default, help=f"{help} (default: {shown})")


def add_classes(parser, help="size of the head"):
    parser.add_argument("--classes", type=int, default=1000, help=f"{help} (default: %(default)s)")


def add_settings(parser, settings):
    """One flag per `keras_vit.training.settings.Setting`; one left out is not passed: the library's default applies."""
    for setting in settings:
        help = f"{setting.help} (default: {setting.default_text})".replace("%", "%%")
        if setting.type is bool:
            kwargs = dict(action="store_true")
        else:
            kind = weights_value if setting.flag == "--weights" else setting.type
            kwargs = dict(type=kind, choices=setting.choices)
        parser.add_argument(setting.flag, default=argparse.SUPPRESS, help=help, **kwargs)
