"""`build_from_checkpoint` against transformers' DINOv2 (with and without registers), SigLIP and CLIP vision towers
and the distilled DeiT: each built tiny with random weights and saved with `save_pretrained`; the features (DeiT's
averaged logits) agree within 1e-4 relative."""

import json

import numpy as np
import pytest

from keras_vit.pretrained import CheckpointError, build_from_checkpoint, io
from keras_vit.pretrained.export import model_weights, write_weights
from tests.helpers import to_numpy

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=24, patch_size=8)
FAMILIES = (
    ("Dinov2Model", "Dinov2Config", dict(layerscale_value=0.5)),
    ("Dinov2WithRegistersModel", "Dinov2WithRegistersConfig", dict(num_register_tokens=2)),
    ("SiglipVisionModel", "SiglipVisionConfig", dict(intermediate_size=128)),
    ("CLIPVisionModel", "CLIPVisionConfig", dict(intermediate_size=128)),
    ("CLIPVisionModel", "CLIPVisionConfig", dict(intermediate_size=128, hidden_act="gelu")),  # LAION's OpenCLIP
    ("DeiTForImageClassificationWithTeacher", "DeiTConfig", dict(intermediate_size=128, num_labels=5)),
    ("Dinov2Model", "Dinov2Config", dict(use_swiglu_ffn=True)),  # the giant's SwiGLU, 88 wide here
)
# What `write_weights` reads of the model's arguments (`get_config`'s first call would import TensorFlow).
ARCHITECTURE = ("patch_size", "hidden_dim", "num_layers", "num_heads", "mlp_dim", "embedding_grid", "mlp_activation")
ARCHITECTURE += ("layer_norm_epsilon", "num_register_tokens")
TEXT_TOWER = {"text_model.embeddings.token_embedding.weight": np.ones((4, 8)), "text_projection.weight": np.eye(8)}


def saved_reference(model_class, config_class, options, folder):
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**TINY, **options)
    reference = getattr(transformers, model_class)(config).eval()
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))  # every weight matters, norms and layer scale too
    reference.save_pretrained(folder)
    return reference


def features(reference, images, **options):
    with torch.no_grad():
        output = reference(torch.from_numpy(images.transpose(0, 3, 1, 2)), **options)
    return (output.logits if "logits" in output else output.pooler_output).numpy()


def assert_close(actual, expected):
    scale = np.abs(expected).max()
    np.testing.assert_allclose(to_numpy(actual) / scale, expected / scale, rtol=0, atol=1e-4)


@pytest.mark.parametrize("model_class, config_class, options", FAMILIES)
def test_features_match_transformers(model_class, config_class, options, tmp_path):
    reference = saved_reference(model_class, config_class, options, tmp_path / "reference")
    images = np.random.default_rng(0).standard_normal((2, 24, 24, 3)).astype("float32")
    expected = features(reference, images)
    model = build_from_checkpoint(tmp_path / "reference", include_preprocessing=False)
    assert_close(model(images), expected)
    # At another size the position embedding is resampled as transformers' `interpolate_pos_encoding` does.
    other = np.random.default_rng(1).standard_normal((2, 40, 32, 3)).astype("float32")
    interpolate = {} if model_class.startswith("Dinov2") else dict(interpolate_pos_encoding=True)
    any_size = build_from_checkpoint(tmp_path / "reference", include_preprocessing=False, input_shape=(None, None, 3))
    assert_close(any_size(other), features(reference, other, **interpolate))
    # Exported back to the same layout, transformers' class loads it and gives the same features.
    architecture = {name: getattr(model, name) for name in ARCHITECTURE}
    write_weights(model_weights(model), tmp_path / "exported", "hf", architecture)
    exported = getattr(transformers, model_class).from_pretrained(tmp_path / "exported").eval()
    assert_close(features(exported, images), expected)


@pytest.mark.parametrize("model_class, config_class, options", FAMILIES[2:4])
def test_a_whole_clip_or_siglip_file_and_a_bare_one(model_class, config_class, options, tmp_path):
    reference = saved_reference(model_class, config_class, options, tmp_path)
    images = np.random.default_rng(0).standard_normal((2, 24, 24, 3)).astype("float32")
    tensors = {
        f"vision_model.{name}": value for name, value in io.read_safetensors(tmp_path / "model.safetensors")[0].items()
    }
    io.write_safetensors(tmp_path / "model.safetensors", dict(tensors, logit_scale=np.ones(()), **TEXT_TOWER))
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(model_type="whole", vision_config=config)))
    assert_close(build_from_checkpoint(tmp_path, include_preprocessing=False)(images), features(reference, images))
    (tmp_path / "config.json").unlink()  # the model class's defaults, the heads given
    bare = build_from_checkpoint(tmp_path / "model.safetensors", num_heads=2, include_preprocessing=False)
    assert_close(bare(images), features(reference, images))
    config["model_type"] = "vit"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="vit"):
        build_from_checkpoint(tmp_path)


def test_the_pixel_mean_and_std_come_from_the_image_processor_saved_beside(tmp_path):
    reference = saved_reference(*FAMILIES[3], tmp_path)  # OpenAI CLIP
    mean, std = [0.4, 0.5, 0.6], [0.2, 0.3, 0.25]
    sizes = dict(size=dict(shortest_edge=24), crop_size=dict(height=24, width=24))
    processor = transformers.CLIPImageProcessorPil(image_mean=mean, image_std=std, **sizes)
    processor.save_pretrained(tmp_path)
    model = build_from_checkpoint(tmp_path)
    assert model.get_config()["pixel_mean"] == tuple(mean) and model.get_config()["pixel_std"] == tuple(std)
    # Raw pixels in, transformers' features of the processor's pixel values out.
    images = np.random.default_rng(0).integers(0, 256, size=(2, 24, 24, 3)).astype("uint8")
    pixel_values = processor(list(images), return_tensors="np")["pixel_values"].transpose(0, 2, 3, 1)
    assert_close(model(images.astype("float32")), features(reference, pixel_values))
