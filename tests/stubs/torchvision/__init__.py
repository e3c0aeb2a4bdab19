"""Test-only stand-in for torchvision (see tests/stubs/README.md); not the real package."""

__version__ = "0.0.0+keras-vit-test-stub"


def unavailable(qualified_name):
    """A placeholder class for a torchvision name that timm imports but a ViT never uses."""

    def refuse(*args, **kwargs):
        raise RuntimeError(
            f"{qualified_name} comes from keras_vit's test stand-in for torchvision, which only makes timm "
            "importable; install the real torchvision to use it."
        )

    return type(qualified_name.rsplit(".", 1)[-1], (), {"__init__": refuse, "__qualname__": qualified_name})
