"""Test-only stand-in (see tests/stubs/README.md): the one name timm's layers import."""

from torchvision import unavailable

FrozenBatchNorm2d = unavailable("torchvision.ops.misc.FrozenBatchNorm2d")
