"""The docstring examples are tests too: they run on every backend."""

import doctest

import keras
import numpy as np
import pytest

import keras_vit.applications
import keras_vit.layers
import keras_vit.models
import keras_vit.resampling
import keras_vit.resnet
import keras_vit.variants

MODULES = [
    keras_vit.applications,
    keras_vit.layers,
    keras_vit.models,
    keras_vit.resampling,
    keras_vit.resnet,
    keras_vit.variants,
]


@pytest.mark.parametrize(
    "module",
    MODULES,
    ids=lambda m: m.__name__,
)
def test_docstring_examples_run(module):
    result = doctest.testmod(module, extraglobs={"np": np, "keras": keras}, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
