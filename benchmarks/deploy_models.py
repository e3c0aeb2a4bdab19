"""The models and data both deploy benchmarks measure (`benchmarks.deploy` and `benchmarks.deploy_int8`)."""

import numpy as np


def digits(image_size, with_train=False):
    """The scikit-learn digits as uint8 RGB images of `image_size`: the evaluation split (and, with
    `with_train`, the training split first), split as `keras-vit finetune --dataset digits` splits them."""
    import tensorflow as tf
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from keras_vit.training.finetune import DIGITS_HOLDOUT_FRACTION

    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    train_x, eval_x, train_y, eval_y = train_test_split(
        images, digits.target, test_size=DIGITS_HOLDOUT_FRACTION, stratify=digits.target, random_state=0
    )

    def rgb(gray):
        resized = tf.image.resize(np.repeat(gray[..., None], 3, axis=-1).astype("float32"), (image_size, image_size))
        return np.clip(np.round(resized.numpy()), 0, 255).astype("uint8")

    if with_train:
        return (rgb(train_x), train_y), (rgb(eval_x), eval_y)
    return rgb(eval_x), eval_y


def b16_model():
    """ViT-B/16, random weights, logits (the zero-initialised head gets random weights too)."""
    from keras_vit.models.applications import ViTB16

    model = ViTB16(weights=None, classifier_activation=None)
    rng = np.random.default_rng(0)
    for variable in model.weights:
        if variable.path.startswith("head/"):  # the zero-initialised head would give zero logits
            variable.assign(rng.normal(0, 0.02, variable.shape).astype("float32"))
    return model
