"""`keras-vit predict / convert / download` with a hybrid's name, run in-process through `cli.main` (finetune: in
tests/test_finetune.py).

The R+Ti/16 row of the variant table is shrunk (a 32-channel ResNet root, one block 32 wide); nothing is
downloaded: the Hub fetch returns a local file and the https mirror is a local HTTP server.
"""

import os

import numpy as np
import pytest

import keras_vit_cli as cli
from keras_vit import models, pretrained
from keras_vit.models.variants import VARIANTS
from tests import pretrained_helpers as ph
from tests.helpers import BACKEND, randomize_weights

ONE_BACKEND = pytest.mark.skipif(BACKEND != "tensorflow", reason="backend-independent or one run is enough: tensorflow")
TINY_R_TI16 = dict(
    hidden_dim=32, num_layers=1, num_heads=2, mlp_dim=64, patch_size=8, resnet_stages=(), resnet_width=32
)


@pytest.fixture
def tiny_hybrid(monkeypatch):
    monkeypatch.setitem(VARIANTS, "R+Ti/16", TINY_R_TI16)


def _timm_file(tmp_path, classes=5, size=64):
    """A random tiny R+Ti/16 written in timm's layout (the Hub's safetensors); returns (path, its tensors)."""
    model = models.VisionTransformer(**TINY_R_TI16, input_shape=(size, size, 3), classes=classes)
    randomize_weights(model)
    path = pretrained.export_weights(model, tmp_path / "r_ti16.safetensors", "timm")
    return str(path), pretrained.load_checkpoint(path).weights


def _image(tmp_path, shape=(45, 37, 3)):
    from PIL import Image

    path = tmp_path / "image.png"
    Image.fromarray(np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8)).save(path)
    return str(path)


def test_predict_with_a_hybrid_constructor(tiny_hybrid, tmp_path, capsys):
    image = _image(tmp_path)
    # At 72 px (no multiple of the 32 px token) the file's 2x2 position embedding is resampled to 3x3.
    weights, _ = _timm_file(tmp_path)
    argv = ["predict", image, "--model", "ViTRTi16", "--weights", weights, "--image-size", "72", "--classes", "5"]
    assert cli.main([*argv, "--top", "3"]) == 0
    scores = [float(line.split()[0]) for line in capsys.readouterr().out.splitlines()[1:]]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)


@ONE_BACKEND
def test_convert_a_hybrid_both_layouts_both_ways(tiny_hybrid, tmp_path, capsys):
    timm_file, original = _timm_file(tmp_path)
    npz, back = str(tmp_path / "r_ti16.npz"), str(tmp_path / "back.safetensors")
    assert cli.main(["convert", timm_file, npz, "--num-heads", "2"]) == 0
    assert cli.main(["convert", npz, back]) == 0
    assert "official layout" in capsys.readouterr().out
    assert "conv_root/kernel" in np.load(npz) and "gn_root/scale" in np.load(npz)
    for path, format in ((npz, "official"), (back, "timm")):
        checkpoint = pretrained.load_checkpoint(path)
        assert checkpoint.format == format and checkpoint.architecture(num_heads=2)["resnet_stages"] == ()
        assert sorted(checkpoint.weights) == sorted(original)
        for name, value in original.items():
            np.testing.assert_array_equal(checkpoint.weights[name], value, err_msg=f"{format}: {name}")


@ONE_BACKEND
def test_download_a_hybrid_from_the_hub_and_a_mirror(tiny_hybrid, tmp_path, monkeypatch, capsys):
    timm_file, _ = _timm_file(tmp_path)
    requested = ph.fake_hub(monkeypatch, timm_file)
    assert cli.main(["download", "ViTRTi16", "--weights", "augreg_in21k_ft_in1k", "--image-size", "384"]) == 0
    assert [repo for repo, _ in requested] == ["timm/vit_tiny_r_s16_p8_384.augreg_in21k_ft_in1k"]
    output = capsys.readouterr().out
    assert "cached at" in output and "ResNet" in output

    # An http(s) mirror, served from a local folder into an empty cache.
    monkeypatch.setenv("KERAS_VIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("KERAS_VIT_OFFLINE", raising=False)
    with ph.serve_folder(tmp_path) as base_url:
        assert cli.main(["download", "R+Ti/16", "--weights", f"{base_url}/r_ti16.safetensors"]) == 0
    output = capsys.readouterr().out
    cached = output.split("cached at ")[1].split("\n")[0]
    assert cached.startswith(os.path.realpath(tmp_path / "cache"))
    assert open(cached, "rb").read() == open(timm_file, "rb").read()
    assert cli.main(["download", "ViTRTi16", "--weights", "no_such_tag"]) == 2
    assert "Valid tags for" in capsys.readouterr().err
