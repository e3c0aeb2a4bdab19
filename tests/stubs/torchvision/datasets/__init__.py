"""Test-only stand-in (see tests/stubs/README.md): timm.data imports these dataset classes at import time."""

from torchvision import unavailable


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return unavailable(f"torchvision.datasets.{name}")
