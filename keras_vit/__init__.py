"""keras_vit: the Vision Transformer (Dosovitskiy et al., ICLR 2021) in Keras 3.

Runs on the TensorFlow, JAX and PyTorch backends. Models follow the
`keras.applications` signature:

    import keras_vit
    model = keras_vit.ViTB16(include_top=True, weights=None)
"""

import os
import sys


def _hand_over_to_the_command_line():
    """`python -m keras_vit ARGS` becomes `python -m keras_vit_cli ARGS` before this package imports Keras.

    Python imports a package before its `__main__`, so run as `-m keras_vit` this package would import Keras
    (and TensorFlow's start-up logs) before the command line could quiet them (`keras_vit_cli.quiet`, which
    must run first). The library never imports the command line: it starts it in its place instead, with the
    same interpreter options, arguments, environment and process id (`os.execv`; elsewhere than POSIX the
    package's `__main__` runs it, logs and all).
    """
    if sys.argv[:1] != ["-m"] or os.name != "posix":
        return  # an import, or `-m` of another module still being located
    original = list(getattr(sys, "orig_argv", ()))
    for index, argument in enumerate(original[1:], start=1):
        if argument.startswith("-m"):
            target = argument[2:] or (original[index + 1] if index + 1 < len(original) else None)
            if target == __name__:
                os.execv(sys.executable, [sys.executable, *original[1:index], "-m", "keras_vit_cli", *sys.argv[1:]])
            return


_hand_over_to_the_command_line()

from keras_vit.utils import module_aliases  # noqa: E402

# Where each public module of the flat layout lives now: `import keras_vit.data`,
# `keras_vit.files.atomic_file`, ... keep working (the same module objects).
MOVED_MODULES = {
    "applications": "models.applications",
    "variants": "models.variants",
    "flops": "models.flops",
    "preprocessing": "models.preprocessing",
    "metadata": "models.metadata",
    "resnet": "layers.resnet",
    "resampling": "layers.resampling",
    "data": "training.data",
    "layer_decay": "training.layer_decay",
    "distribute": "training.distribute",
    "multihost": "training.multihost",
    "finetune": "training.finetune",
    "files": "utils.files",
    "inspect": "inspection",
}
__getattr__ = module_aliases.install(
    __name__,
    MOVED_MODULES,
    deprecated={
        "inspect": "`keras_vit.inspect` is deprecated and will be removed in keras_vit 0.3: use "
        "`keras_vit.inspection` (the old name shadows the standard library's `inspect`)."
    },
)

# `training` (its recipes) and `layer_decay` are imported for their registered schedule,
# loss and optimizers: a model compiled with them reloads after `import keras_vit`.
from keras_vit import layers, models, training  # noqa: E402
from keras_vit.layers import resnet  # noqa: E402
from keras_vit.layers.resampling import resample_position_embedding  # noqa: E402
from keras_vit.models import applications, variants  # noqa: E402
from keras_vit.models.applications import (  # noqa: E402
    CONSTRUCTORS,
    VisionTransformer,
    ViTB8,
    ViTB16,
    ViTB32,
    ViTH14,
    ViTL16,
    ViTL32,
    ViTR26B32,
    ViTR26S32,
    ViTR50B16,
    ViTR50L32,
    ViTRTi16,
    ViTS16,
    ViTS32,
    ViTTi16,
    constructor_for,
)
from keras_vit.models.metadata import class_names  # noqa: E402
from keras_vit.models.preprocessing import decode_predictions, preprocess_input  # noqa: E402
from keras_vit.models.variants import VARIANTS  # noqa: E402
from keras_vit.training import layer_decay  # noqa: E402
from keras_vit.utils import keras_compat  # noqa: E402

# On jax / torch, reading a layer's config (the architecture record, saving) imports no TensorFlow.
keras_compat.serializer_imports_no_tensorflow()

__version__ = "0.1.0"

__all__ = [
    "CONSTRUCTORS",
    "VARIANTS",
    "VisionTransformer",
    "ViTTi16",
    "ViTS16",
    "ViTS32",
    "ViTB8",
    "ViTB16",
    "ViTB32",
    "ViTL16",
    "ViTL32",
    "ViTH14",
    "ViTRTi16",
    "ViTR26S32",
    "ViTR26B32",
    "ViTR50B16",
    "ViTR50L32",
    "applications",
    "class_names",
    "constructor_for",
    "decode_predictions",
    "layer_decay",
    "layers",
    "models",
    "preprocess_input",
    "resample_position_embedding",
    "resnet",
    "training",
    "variants",
]
