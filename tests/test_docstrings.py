"""Every module's docstring examples run, and the constructors' docstrings state their variants."""

import doctest
import importlib
import inspect
import pkgutil
import pydoc

import keras
import numpy as np
import pytest

import keras_vit
import keras_vit_cli
from keras_vit.models.applications import CONSTRUCTORS
from keras_vit.models.variants import VARIANTS

# Their examples exercise the backend-specific ops.
EVERY_BACKEND = (
    "keras_vit.layers.transformer",
    "keras_vit.models.vit",
    "keras_vit.layers.resampling",
    "keras_vit.models.applications",
)
# Entry points run the command when imported.
NOT_IMPORTABLE = ("keras_vit_cli.__main__",)


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


@pytest.mark.parametrize("name", list(CONSTRUCTORS))
def test_constructor_docstring_and_help_state_its_variant_and_every_argument(name):
    from keras_vit import pretrained
    from tests.test_models import PINNED_PARAMS

    function = CONSTRUCTORS[name]
    variant, row = function.variant, VARIANTS[function.variant]
    doc = " ".join(inspect.getdoc(function).split())
    assert doc.startswith(
        f"Builds ViT-{variant}: {row['hidden_dim']} hidden, {row['num_layers']} layers, "
        f"{row['num_heads']} heads, MLP {row['mlp_dim']}."
    )
    assert f"{row['patch_size']}x{row['patch_size']} patches" in doc
    assert f"{PINNED_PARAMS[variant][1]:,} parameters at 224 px" in doc
    for parameter in inspect.signature(function).parameters:
        assert f" {parameter}: " in doc or f" **{parameter}: " in doc, parameter
    tags = [tag for tag in pretrained.available_tags(variant) if tag != "imagenet"]
    other_tags = {tag for other in VARIANTS for tag in pretrained.available_tags(other)} - set(tags) - {"imagenet"}
    assert all(f'`"{tag}"`' in doc for tag in tags) and not any(f'`"{tag}"`' in doc for tag in other_tags)
    imagenet = "imagenet" in pretrained.available_tags(variant)
    assert ('`"imagenet"`, the best ImageNet-1k classifier' in doc) == imagenet
    assert f'available_tags("{variant}")' in doc and "hf://" in doc and "{" not in doc
    # `help(keras_vit.ViTB16)` shows the signature and the Args as written.
    text = pydoc.render_doc(function, renderer=pydoc.plaintext)
    assert f"{name}(include_top=True, include_preprocessing=True, weights=None" in text
    assert "\n        include_top: bool, whether to add the classification head." in text
