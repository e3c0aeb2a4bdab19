"""The docstring examples of every module of keras_vit and keras_vit_cli run as tests.

Examples that build models (layers, models, applications, resampling) run on
every backend; the rest do the same on any backend and run on the
tensorflow run only.
"""

import doctest
import importlib
import pkgutil

import keras
import numpy as np
import pytest

import keras_vit
import keras_vit_cli

# Their examples exercise the backend-specific ops.
EVERY_BACKEND = (
    "keras_vit.layers.transformer",
    "keras_vit.models.vit",
    "keras_vit.layers.resampling",
    "keras_vit.models.applications",
)
# Entry points run the command when imported.
NOT_IMPORTABLE = ("keras_vit.__main__", "keras_vit_cli.__main__")


def all_modules():
    names = []
    for package in (keras_vit, keras_vit_cli):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
            if info.name not in NOT_IMPORTABLE:
                names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", all_modules())
def test_docstring_examples_run(name):
    if name not in EVERY_BACKEND and keras.backend.backend() != "tensorflow":
        pytest.skip("backend-independent examples: the tensorflow run")
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, extraglobs={"np": np, "keras": keras, "keras_vit": keras_vit}, optionflags=doctest.ELLIPSIS
    )
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
    if name in EVERY_BACKEND:
        assert result.attempted > 0
