"""The docstring examples of every module of keras_vit and keras_vit_cli run as tests.

Examples that build models (layers, models, applications, resampling) run on
every backend; the rest do the same on any backend and run on the
tensorflow run only.
"""

import doctest
import importlib
import inspect
import pkgutil
import types

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
    "keras_vit.layers.initializers",
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


# --- the constructors' docstrings, assembled from one template (keras_vit.models.applications) ---------------------


def _args(function):
    from keras_vit.utils import docstrings

    return docstrings.args_entries(function)


@pytest.mark.parametrize("name", list(CONSTRUCTORS))
def test_constructor_signature_is_the_template(name):
    from keras_vit.models.applications import CONSTRUCTOR_DEFAULTS

    parameters = inspect.signature(CONSTRUCTORS[name]).parameters
    assert list(parameters) == list(CONSTRUCTOR_DEFAULTS)
    defaults = {key: parameter.default for key, parameter in parameters.items()}
    assert defaults | {"name": None} == CONSTRUCTOR_DEFAULTS
    assert defaults["name"].startswith("vit_")


def test_a_constructor_that_drifts_from_the_template_is_refused():
    from keras_vit.models.applications import CONSTRUCTOR_DEFAULTS, CONSTRUCTORS, register_constructor

    def ViTB16Drift(include_top=True, weights=None):  # noqa: N802
        return None

    # ViTB16 with classes=10 by default instead of the template's 1000.
    defaults = list(keras_vit.ViTB16.__defaults__)
    defaults[list(CONSTRUCTOR_DEFAULTS).index("classes")] = 10
    ViTB16Default = types.FunctionType(  # noqa: N806
        keras_vit.ViTB16.__code__, keras_vit.ViTB16.__globals__, "ViTB16Default", tuple(defaults)
    )
    for function in (ViTB16Drift, ViTB16Default):
        with pytest.raises(TypeError, match="CONSTRUCTOR_DEFAULTS"):
            register_constructor("B/16")(function)
    assert "ViTB16Drift" not in CONSTRUCTORS and "ViTB16Default" not in CONSTRUCTORS


@pytest.mark.parametrize("name", list(CONSTRUCTORS))
def test_constructor_docstring_is_complete_and_states_its_variant(name):
    from keras_vit import pretrained
    from tests.test_models import PINNED_PARAMS

    function = CONSTRUCTORS[name]
    variant, row = function.variant, VARIANTS[function.variant]
    doc = inspect.getdoc(function)
    entries = _args(function)
    assert list(entries) == list(inspect.signature(function).parameters)  # every parameter, in order
    assert all(len(entry.split(":", 1)[1].strip()) > 10 for entry in entries.values())
    expected_title = (
        f"Builds ViT-{variant}: {row['hidden_dim']} hidden, {row['num_layers']} layers, "
        f"{row['num_heads']} heads, MLP {row['mlp_dim']}."
    )
    assert doc.splitlines()[0] == expected_title
    patch = row["patch_size"]
    assert f"{patch}x{patch} patches" in " ".join(doc.split())
    assert f"{PINNED_PARAMS[variant][1]:,} parameters at 224 px" in doc
    weights = " ".join(entries["weights"].split())
    every_tag = sorted({tag for other in VARIANTS for tag in pretrained.available_tags(other)})
    tags = [tag for tag in pretrained.available_tags(variant) if tag != "imagenet"]
    assert [tag for tag in every_tag if tag != "imagenet" and f'`"{tag}"`' in weights] == tags
    assert f'available_tags("{variant}")' in weights
    imagenet = "imagenet" in pretrained.available_tags(variant)
    assert ('`"imagenet"`, the best ImageNet-1k classifier' in weights) == imagenet
    for part in ("Args:", "Returns:"):
        assert part in doc


def test_constructors_share_the_vision_transformer_argument_texts():
    # The named constructors describe each shared argument with VisionTransformer's own entry.
    source = _args(keras_vit.VisionTransformer)
    parameters = inspect.signature(keras_vit.VisionTransformer).parameters
    assert list(source) == [name for name in parameters if name != "kwargs"]
    for function in (keras_vit.ViTB16, keras_vit.ViTRTi16):
        entries = _args(function)
        assert list(entries) == list(inspect.signature(function).parameters)
        shared = [name for name in entries if name != "weights"]
        assert shared and all(entries[name] == source[name] for name in shared)
    assert "this same architecture" in source["weights"]


def test_help_shows_the_signature_and_the_rendered_docstring():
    import pydoc

    text = pydoc.render_doc(keras_vit.ViTB16, renderer=pydoc.plaintext)
    assert "ViTB16(include_top=True, include_preprocessing=True, weights=None" in text
    assert "    Builds ViT-B/16: 768 hidden, 12 layers, 12 heads, MLP 3072." in text
    assert "\n        include_top: bool, whether to add the classification head." in text
    assert "{" not in inspect.getdoc(keras_vit.ViTB16)  # every template field filled
