"""timm's Vision Transformers, with random weights, as the independent reference in tests.

timm imports torchvision names a ViT never calls, and torchvision has no CPU build on this project's index: while timm
is imported (and only when no real torchvision is installed) the stand-in of `tests/stubs/` is on `sys.path`.
"""

import functools
import importlib.util
import os
import sys

import numpy as np
import pytest

STUB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stubs")


@functools.cache
def import_timm():
    """Returns the `timm` module, or skips the test when timm or torch is missing."""
    pytest.importorskip("torch")
    if importlib.util.find_spec("timm") is None:
        pytest.skip("timm is not installed (requirements/no-deps.txt)")
    stand_in = importlib.util.find_spec("torchvision") is None
    if stand_in:
        sys.path.insert(0, STUB_DIR)
    try:
        import timm
        import timm.layers
        import timm.models.resnetv2
        import timm.models.vision_transformer
    finally:
        if stand_in:
            sys.path.remove(STUB_DIR)
            # timm keeps the objects it took from the stand-in; nothing else may find a torchvision module.
            for name in [name for name in sys.modules if name == "torchvision" or name.startswith("torchvision.")]:
                del sys.modules[name]
    return timm


def timm_hybrid_vit(
    stage_depths, width, patch_size, hidden_dim, num_layers, num_heads, mlp_dim, image_size, classes=10, **kwargs
):
    """A small timm hybrid ViT (non-pre-activation ResNet, "same" padding) built like timm's published ones, in eval
    mode; `kwargs` go to its `VisionTransformer` (e.g. `dynamic_img_size=True, dynamic_img_pad=True`)."""
    import torch

    timm = import_timm()
    resnetv2 = timm.models.resnetv2
    conv_layer = functools.partial(timm.layers.StdConv2dSame, eps=1e-8)
    torch.manual_seed(0)
    if stage_depths:
        backbone = resnetv2.ResNetV2(
            layers=tuple(stage_depths),
            channels=tuple(4 * width * 2**i for i in range(len(stage_depths))),
            stem_chs=width,
            num_classes=0,
            global_pool="",
            preact=False,
            stem_type="same",
            conv_layer=conv_layer,
        )
    else:
        backbone = resnetv2.create_resnetv2_stem(
            3, out_chs=width, stem_type="same", preact=False, conv_layer=conv_layer
        )
    torch.manual_seed(1)
    model = timm.models.vision_transformer.VisionTransformer(
        img_size=image_size,
        patch_size=patch_size,
        embed_dim=hidden_dim,
        depth=num_layers,
        num_heads=num_heads,
        mlp_ratio=mlp_dim / hidden_dim,
        num_classes=classes,
        embed_layer=functools.partial(timm.layers.HybridEmbed, backbone=backbone),
        **kwargs,
    )
    return model.eval()


def timm_model(name, **kwargs):
    """A published timm hybrid (`vit_base_r50_s16_224`, ...) with random weights, in eval mode."""
    return import_timm().create_model(name, pretrained=False, **kwargs).eval()


def randomize_torch(model, seed=0, scale=0.2):
    """Random values for every tensor: zero-initialised ones would hide wiring mistakes."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * scale)
    return model


def state_dict_numpy(model):
    return {name: tensor.detach().cpu().numpy() for name, tensor in model.state_dict().items()}


def run_torch(module, images_nhwc):
    """Runs a timm module on channels-last NumPy images; returns NumPy (NHWC for feature maps)."""
    import torch

    with torch.no_grad():
        out = module(torch.from_numpy(np.ascontiguousarray(images_nhwc.transpose(0, 3, 1, 2))))
    out = out.numpy()
    return out.transpose(0, 2, 3, 1) if out.ndim == 4 else out
