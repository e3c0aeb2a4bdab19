"""FlexiViT: a patch kernel resized by the pseudo-inverse (against timm's `resample_patch_embed`), and a FlexiViT
checkpoint loaded at another patch size against timm's model created at that patch size from the same file (timm's
own resampling path: bilinear, no antialias); other checkpoints and untrained patch sizes are refused. The rows'
cfg is checked in tests/test_pretrained_registry.py."""

import numpy as np
import pytest

import keras_vit
from keras_vit import pretrained
from keras_vit.layers.resampling import resample_patch_kernel
from keras_vit.models.variants import VARIANTS
from keras_vit.pretrained import download, registry
from tests import pretrained_helpers as ph
from tests import timm_reference
from tests.helpers import BACKEND

SIZE = 48  # the saved model's image: three 16 px patches a side
SMALL = dict(embed_dim=128, num_heads=2, img_size=SIZE)  # FlexiViT-S at a tiny width; 64-wide heads as timm's


@pytest.mark.skipif(BACKEND != "torch", reason="NumPy against timm: the torch run")
@pytest.mark.parametrize(
    "old, new, method, antialias",
    [
        ((16, 16), (8, 8), "bilinear", False),
        ((16, 16), (48, 48), "bilinear", False),
        ((16, 16), (10, 10), "bicubic", True),
        ((16, 16), (24, 24), "bicubic", True),
        ((16, 12), (20, 9), "bilinear", False),
        ((32, 32), (15, 15), "bicubic", False),
    ],
)
def test_resample_patch_kernel_matches_timm(old, new, method, antialias):
    torch = pytest.importorskip("torch")
    resample_patch_embed = timm_reference.import_timm().layers.resample_patch_embed
    kernel = np.random.default_rng(0).normal(0, 0.2, (*old, 3, 4)).astype("float32")
    ours = resample_patch_kernel(kernel, new, method, antialias)
    assert ours.shape == (*new, 3, 4) and ours.dtype == np.float32
    torch_kernel = torch.from_numpy(kernel.transpose(3, 2, 0, 1).copy())  # HWIO -> OIHW
    expected = resample_patch_embed(torch_kernel, list(new), interpolation=method, antialias=antialias)
    np.testing.assert_allclose(ours, expected.numpy().transpose(2, 3, 1, 0), rtol=0, atol=1e-5)
    np.testing.assert_array_equal(resample_patch_kernel(kernel, old), kernel)


@pytest.mark.parametrize("patch_size, tag", [(8, None), (24, None), (12, "flexivit_1200ep_in1k")])
def test_a_flexivit_checkpoint_loads_at_another_patch_size_as_timm(patch_size, tag, monkeypatch, tmp_path):
    ph.timm_saved_like_the_hub("flexivit_small", str(tmp_path), **SMALL)
    if tag is None:  # the file
        model = pretrained.build_from_checkpoint(tmp_path, patch_size=patch_size)
    else:  # FlexiViT-S's 1200ep row, at the saved file's size and width, served by a fake Hub
        sizes = dict(hidden_dim=SMALL["embed_dim"], num_layers=1, num_heads=2, mlp_dim=4 * SMALL["embed_dim"])
        monkeypatch.setitem(VARIANTS, "S/16", dict(sizes, patch_size=16))
        ph.replace_row(monkeypatch, registry.resolve("S/16", tag), resolution=SIZE)
        requested = ph.fake_hub(monkeypatch, str(tmp_path / "model.safetensors"))
        options = dict(sizes, input_shape=(SIZE, SIZE, 3), classifier_activation=None)
        model = keras_vit.VisionTransformer(**options, patch_size=patch_size, weights=tag)
        assert requested == [("timm/flexivit_small.1200ep_in1k", "model.safetensors")]
    assert model.patch_size == (patch_size, patch_size) and model.no_embed_class
    assert (model.resample_method, model.resample_antialias) == ("bilinear", False)
    # timm's FlexiViT-S built at `patch_size` from the saved file, resampled by timm's FlexiViT loading path.
    file = dict(file=str(tmp_path / "model.safetensors"))
    arguments = dict(SMALL, depth=1, patch_size=patch_size, pretrained_cfg_overlay=file)
    reference = timm_reference.import_timm().create_model("flexivit_small", pretrained=True, **arguments).eval()
    images = ph.images((2, SIZE, SIZE, 3))
    expected = timm_reference.run_torch(reference, images)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(ph.outputs(model, images) / scale, expected / scale, rtol=0, atol=1e-4)


@pytest.mark.parametrize(
    "source, patch_size, message",
    [
        ("flexivit_1200ep_in1k", 14, "trained at patch sizes 8, 10, 12, 15, 16, 20, 24, 30, 40, 48"),
        ("flexivit_1200ep_in1k", (16, 8), "trained at patch sizes 8, 10, 12, 15, 16, 20, 24, 30, 40, 48"),
        ("flexivit_small", 14, "a FlexiViT checkpoint trained at patch sizes"),
        ("vit_small_patch16_224", 24, "Only a FlexiViT checkpoint loads at another patch size"),
    ],
)
def test_untrained_patch_sizes_and_other_checkpoints_are_refused(source, patch_size, message, monkeypatch, tmp_path):
    monkeypatch.setattr(download, "hf_download", lambda *a, **k: pytest.fail("refused before the download"))
    with pytest.raises(ValueError, match=message) as error:
        if source.startswith("flexivit_1200ep"):
            sizes = {key: VARIANTS["S/16"][key] for key in ("hidden_dim", "num_layers", "num_heads", "mlp_dim")}
            keras_vit.VisionTransformer(**sizes, patch_size=patch_size, weights=source)
        else:
            ph.timm_saved_like_the_hub(source, str(tmp_path), **SMALL)
            pretrained.build_from_checkpoint(tmp_path, patch_size=patch_size, input_shape=(SIZE, SIZE, 3))
    assert "\n" not in str(error.value)
