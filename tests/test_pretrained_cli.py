"""`keras-vit download / convert / predict` with checkpoints, run in-process through `cli.main`."""

import keras
import numpy as np
import pretrained_helpers as ph
import pytest

import keras_vit
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


def test_convert_keeps_a_clip_towers_quick_gelu_and_epsilon_through_timm_and_back(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    config = transformers.CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=24, patch_size=8
    )
    assert (config.hidden_act, config.layer_norm_eps) == ("quick_gelu", 1e-5)
    reference = transformers.CLIPVisionModel(config)
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.add_(0.2 * torch.randn_like(parameter))  # activations wide enough to tell the GELUs apart
    reference.save_pretrained(tmp_path / "clip")
    timm, back = str(tmp_path / "clip.safetensors"), str(tmp_path / "back")
    assert cli.main(["convert", str(tmp_path / "clip"), timm]) == 0
    assert cli.main(["convert", timm, back, "--to", "hf", "--num-heads", "2"]) == 0
    # The official .npz is run with the JAX code's GELU: a QuickGELU ViT is refused, nothing written.
    quick = keras_vit.VisionTransformer(
        patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32, mlp_activation="quick_gelu"
    )
    with pytest.raises(ValueError, match="quick_gelu"):
        pretrained.export_weights(quick, tmp_path / "quick.npz", "official")
    assert not (tmp_path / "quick.npz").exists()
    images = np.random.default_rng(0).standard_normal((2, 24, 24, 3)).astype("float32")
    pixels = torch.from_numpy(images.transpose(0, 3, 1, 2))
    converted = transformers.CLIPVisionModel.from_pretrained(back).eval()
    assert (converted.config.hidden_act, converted.config.layer_norm_eps) == ("quick_gelu", 1e-5)
    with torch.no_grad():
        expected = reference.eval()(pixels).pooler_output.numpy()
        np.testing.assert_allclose(converted(pixels).pooler_output.numpy(), expected, rtol=0, atol=1e-6)
    from_timm = pretrained.build_from_checkpoint(timm, num_heads=2, include_preprocessing=False)
    assert (from_timm.mlp_activation, from_timm.layer_norm_epsilon) == ("quick_gelu", 1e-5)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(from_timm(images)), expected, rtol=0, atol=1e-4)
