"""The one registration decorator for keras_vit's serializable objects.

Every layer, schedule, loss and optimizer of the package registers under the
package name `keras_vit`, so saved configs read `keras_vit>ClassName` and
`keras.saving.load_model` revives them after a plain `import keras_vit`.
"""

import keras

PACKAGE = "keras_vit"


def register(cls):
    """Registers `cls` with Keras under the `keras_vit` package name."""
    return keras.saving.register_keras_serializable(package=PACKAGE)(cls)
