"""Test-only stand-in (see tests/stubs/README.md): timm.data subclasses or lists these transform classes."""

from torchvision import unavailable


def __getattr__(name):
    # timm.data refers to many transform classes (bases of its own transforms,
    # entries of its tables) at import time; each becomes an unusable placeholder.
    if name.startswith("__"):
        raise AttributeError(name)
    return unavailable(f"torchvision.transforms.{name}")
