"""`keras-vit download / convert / predict` with checkpoints, run in-process through `cli.main`."""

import numpy as np
import pretrained_helpers as ph
import pytest

import keras_vit_cli as cli
from keras_vit import pretrained


@pytest.fixture
def hf_dir(monkeypatch, tmp_path):
    pytest.importorskip("transformers")
    ph.register_variant(monkeypatch, name="Ti/16", hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64, patch_size=8)
    ph.random_hf_model(ph.hf_config(classes=5)).save_pretrained(tmp_path / "hf")
    return str(tmp_path / "hf")


def test_convert_between_layouts_is_lossless_and_replaces_only_when_asked(hf_dir, tmp_path, capsys):
    original = pretrained.load_checkpoint(hf_dir).weights
    npz, timm, back = (str(tmp_path / name) for name in ("vit.npz", "vit.safetensors", "back"))
    open(npz, "wb").write(b"the user's own file")
    assert cli.main(["convert", hf_dir, npz, "--num-heads", "2"]) == 1
    assert "--overwrite" in capsys.readouterr().err and open(npz, "rb").read() == b"the user's own file"
    assert cli.main(["convert", hf_dir, npz, "--num-heads", "2", "--overwrite"]) == 0
    assert cli.main(["convert", npz, timm]) == 0
    assert cli.main(["convert", timm, back, "--to", "hf", "--num-heads", "2"]) == 0
    assert "official layout" in capsys.readouterr().out
    for path, format in ((npz, "official"), (timm, "timm"), (back, "hf")):
        checkpoint = pretrained.load_checkpoint(path)
        assert checkpoint.format == format and sorted(checkpoint.weights) == sorted(original)
        for name, value in original.items():
            np.testing.assert_array_equal(checkpoint.weights[name], value, err_msg=f"{format}: {name}")


def test_download_preseeds_and_verifies(hf_dir, monkeypatch, tmp_path, capsys):
    # The registry's Ti/16 rows are timm copies: serve a timm-layout file.
    from safetensors.numpy import load_file

    state = ph.hf_to_timm_state(load_file(hf_dir + "/model.safetensors"))
    requested = ph.fake_hub(monkeypatch, ph.write_safetensors(tmp_path / "timm.safetensors", state))
    assert cli.main(["download", "ViTTi16", "--weights", "augreg_in21k_ft_in1k", "--image-size", "384"]) == 0
    assert [repo for repo, _ in requested] == ["timm/vit_tiny_patch16_384.augreg_in21k_ft_in1k"]
    assert "cached at" in capsys.readouterr().out
    assert cli.main(["download", "ViTTi16", "--weights", "no_such_tag"]) == 2
    assert "Valid tags for ViT-Ti/16" in capsys.readouterr().err


def test_predict_prints_top_classes_and_refuses_an_untrained_head(hf_dir, tmp_path, capsys):
    from PIL import Image

    image = str(tmp_path / "cat.png")
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 50, 3), dtype=np.uint8)).save(image)
    argv = ["predict", image, "--model", "ViTTi16", "--weights", hf_dir, "--image-size", "32"]
    assert cli.main([*argv, "--classes", "5", "--top", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == image and len(lines) == 4
    scores = [float(line.split()[0]) for line in lines[1:]]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    # A 5-class checkpoint, the default 1000 classes: the head would be new, zero, and every score 0.001.
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "no trained 1000-class head" in captured.err and "--classes" in captured.err
    assert "Traceback" not in captured.err
