"""Options several `keras-vit` commands share, spelled (and documented) once.

Example:

>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> add_model(parser, "ViTB16")
>>> add_image_size(parser)
>>> add_classes(parser)
>>> add_weights(parser, "imagenet")
>>> vars(parser.parse_args(["--model", "B/16", "--weights", "none"]))
{'model': 'B/16', 'image_size': 224, 'classes': 1000, 'weights': None}
"""

WEIGHTS_HELP = "a checkpoint tag, 'imagenet', a file or folder, hf://org/repo, an https URL, or 'none' (random weights)"


def weights_value(text):
    """A `--weights` value as a constructor's `weights=` takes it: `none` (any case) is `None`, random weights."""
    return None if text.strip().lower() == "none" else text


def add_weights(parser, default, help=WEIGHTS_HELP, required=False):
    """`--weights`: the same values for every command (`none` for random weights)."""
    shown = "none" if default is None else default
    parser.add_argument(
        "--weights",
        type=weights_value,
        default=default,
        required=required,
        help=help if required else f"{help} (default: {shown})",
    )


def add_model(parser, default, saved_model=False):
    """`--model`: a constructor (`ViTB16`) or variant (`B/16`), or also a saved `.keras` model."""
    what = "a constructor (ViTB16), a variant (B/16)" + (" or a saved .keras model" if saved_model else "")
    parser.add_argument("--model", default=default, help=f"{what} (default: %(default)s)")


def add_image_size(parser, default=224, help="square image side in pixels"):
    """`--image-size`: a square input size."""
    parser.add_argument("--image-size", type=int, default=default, help=f"{help} (default: %(default)s)")


def add_classes(parser, help="size of the head"):
    """`--classes`: the head's number of classes."""
    parser.add_argument("--classes", type=int, default=1000, help=f"{help} (default: %(default)s)")


def library_module(name):
    """The `keras_vit` module `name`, a pure-Python one, without importing Keras (`keras_vit_cli.keras_free`).

    A command's flags are built before any command runs, and importing
    `keras_vit` imports Keras (seconds). The module stays registered under
    its name: the library, once imported, uses the same module object.
    """
    from keras_vit_cli import keras_free

    (module,) = keras_free.load(name, keep=True)
    return module


def add_settings(parser, settings):
    """One flag per declared setting (`keras_vit.training.settings.Setting`): `--name-with-dashes`.

    A flag left out is not passed (`argparse.SUPPRESS`), so the library's
    default applies and is resolved in one place; the help shows it.
    """
    import argparse

    for setting in settings:
        help = f"{setting.help} (default: {setting.default_text})".replace("%", "%%")
        kwargs = dict(default=argparse.SUPPRESS, help=help)
        if setting.type is bool:
            kwargs["action"] = "store_true"
        elif setting.flag == "--weights":
            kwargs["type"] = weights_value
        elif setting.type is not str:
            kwargs["type"] = setting.type
        if setting.choices is not None:
            kwargs["choices"] = setting.choices
        parser.add_argument(setting.flag, **kwargs)
