"""RoPE checkpoints: `build_from_checkpoint` reads timm's `Eva` family (DINOv3, EVA-02, PE, RoPE-ViT, sbb) as the Hub
holds it (`benchmarks/timm_coverage.py --module eva` runs them all), transformers' DINOv3ViTModel (and writes it)
and DINOv3's own files; the models give the reference's outputs within 1e-4 at their size and a non-square one."""

import numpy as np
import pytest

import keras_vit
from keras_vit.pretrained import CheckpointError, build_from_checkpoint, export_weights, io, loader
from keras_vit.pretrained.export import convert_checkpoint
from tests import pretrained_helpers, timm_reference
from tests.helpers import reference_outputs, to_numpy

SMALL = dict(embed_dim=128, num_heads=2)
# One architecture per option signature of timm's Eva family with published weights.
ARCHITECTURES = (
    "vit_small_patch16_dinov3",  # DINOv3's RoPE, four registers, layer scale, no qkv bias, averaged after the norm
    "vit_small_patch16_dinov3_qkvb",  # query and value biases (q_bias, v_bias), no key bias
    "vit_small_plus_patch16_dinov3",  # SwiGLU of fc1_g and fc1_x
    "vit_small_patch16_lingbot",  # DINOv3 pooled by the class token
    "eva02_tiny_patch14_224",  # a learned table and RoPE on a 16 x 16 reference grid, packed SwiGLU, fc_norm
    "eva02_base_patch14_224",  # separate q, k, v projections, SwiGLU with its sub-LN (mlp.norm)
    "eva02_base_patch16_clip_224",  # the norm inside the attention (attn.norm), a head on the class token
    "vit_pe_core_tiny_patch16_384",  # PE core: a MAP head of 8 heads over the class token too, then a projection
    "vit_pe_spatial_tiny_patch16_512",  # PE: pre-norm, no patch bias, coordinates from 1 in xy order, no final norm
    "vit_pe_lang_large_patch14_448",  # PE with layer scale
    "vit_small_patch16_rope_224",  # Naver's axial RoPE (theta 100, xy), no position table
    "vit_small_patch16_rope_ape_224",  # and a learned table of the patches only
    "vit_small_patch16_rope_mixed_224",  # Naver's learned frequencies (rope.freqs)
    "vit_small_patch16_rope_mixed_ape_224",
    "vit_medium_patch16_rope_reg1_gap_256",  # sbb: a register and no class token, averaged, fc_norm
)


def saved(name, folder, **timm_arguments):
    return pretrained_helpers.timm_saved_like_the_hub(name, str(folder), **SMALL, **timm_arguments)


def assert_close(actual, expected):
    scale = np.abs(expected).max()
    np.testing.assert_allclose(np.asarray(actual) / scale, expected / scale, rtol=0, atol=1e-4)


def images(height, width, seed=0):
    return np.random.default_rng(seed).standard_normal((2, height, width, 3)).astype("float32")


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_outputs_match_timm_at_its_size_and_a_non_square_one(name, tmp_path):
    # timm's dynamic_img_size: its position table resampled and its RoPE computed for each image's grid.
    reference = saved(name, tmp_path, dynamic_img_size=True)
    patch = reference.patch_embed.patch_size[0]
    model = build_from_checkpoint(tmp_path, include_preprocessing=False, input_shape=(None, None, 3))
    # Random weights hardly feel the epsilon: compared directly (EVA-02's CLIP towers keep timm's 1e-6).
    assert model.rope is not None and model.layer_norm_epsilon == reference.blocks[0].norm1.eps
    batches = [images(*reference.patch_embed.img_size), images(2 * patch, 4 * patch, seed=1)]
    for batch, (actual,) in zip(batches, (reference_outputs(model, batch) for batch in batches)):
        assert_close(actual, timm_reference.run_torch(reference, batch))


def test_a_model_built_at_the_files_size_needs_no_open_input(tmp_path):
    reference = saved("eva02_tiny_patch14_224", tmp_path)
    model = build_from_checkpoint(tmp_path, include_preprocessing=False)
    assert model.image_shape == (42, 42, 3) and model.rope["ref_grid"] == (16, 16)
    batch = images(42, 42)
    assert_close(reference_outputs(model, batch)[0], timm_reference.run_torch(reference, batch))


def test_an_unnamed_rope_file_is_refused_until_something_names_it(tmp_path):
    reference = saved("vit_small_patch16_rope_mixed_224", tmp_path)
    (tmp_path / "config.json").unlink()
    file = tmp_path / "model.safetensors"
    with pytest.raises(CheckpointError, match="rotary position embedding is unknown") as error:
        build_from_checkpoint(file)
    assert "\n" not in str(error.value)
    model = build_from_checkpoint(file, "vit_small_patch16_rope_mixed_224", include_preprocessing=False)
    assert model.num_heads == 2  # rope.freqs shows the heads
    batch = images(48, 48)
    assert_close(reference_outputs(model, batch)[0], timm_reference.run_torch(reference, batch))


def test_the_constructor_refuses_a_model_without_the_files_rope(tmp_path):
    saved("vit_small_patch16_dinov3", tmp_path)
    arguments = dict(patch_size=16, hidden_dim=128, num_layers=1, num_heads=2, mlp_dim=512, include_top=False)
    arguments.update(num_register_tokens=4, position_embedding=False, layer_scale_init=1e-5, qkv_bias=False)
    with pytest.raises(CheckpointError, match="rope=") as error:
        keras_vit.VisionTransformer(**arguments, weights=str(tmp_path))
    assert "\n" not in str(error.value)
    rope = dict(rope_type="dinov3", temperature=100, rotate_half=True)
    model = keras_vit.VisionTransformer(**arguments, layer_norm_epsilon=1e-5, rope=rope, weights=str(tmp_path))
    assert model.rope == rope


@pytest.mark.parametrize(
    "name, arguments",
    [("vit_base_patch16_sapiens2", dict(num_kv_heads=2))],
    ids=["sapiens2"],
)
def test_what_keras_vit_does_not_build_is_refused_in_one_line(name, arguments, tmp_path):
    saved(name, tmp_path, **arguments)
    with pytest.raises(CheckpointError, match="does not build") as error:
        build_from_checkpoint(tmp_path)
    assert "\n" not in str(error.value)


def test_pe_tensors_without_a_name_load_as_the_plain_vit_they_look_like(tmp_path):
    """The residual ambiguity: PE's blocks are CLIP's, so without its config.json the file is a plain ViT's."""
    saved("vit_pe_spatial_tiny_patch16_512", tmp_path)
    (tmp_path / "config.json").unlink()
    model = build_from_checkpoint(tmp_path / "model.safetensors")
    assert model.rope is None and model.pre_norm


def test_a_rope_model_is_not_exported_to_a_layout_without_rope(tmp_path):
    saved("vit_small_patch16_rope_ape_224", tmp_path)
    model = build_from_checkpoint(tmp_path)
    for format in ("timm", "hf"):
        with pytest.raises(ValueError, match="rotary position embedding"):
            export_weights(model, tmp_path / f"out.{format}", format)


def test_every_eva_name_has_its_facts_and_no_vision_transformer_name_has():
    timm = timm_reference.import_timm()

    def names(module):
        return {name.split(".")[0] for name in timm.list_models(module=module, pretrained=True)}

    assert all(loader.eva_facts(name) for name in names("eva"))
    assert not [name for name in names("vision_transformer") if loader.eva_facts(name)]


# ---------------------------------------------------------------- transformers' DINOv3ViTModel

HIDDEN, HEADS, MLP, PATCH = 64, 4, 128, 8


def hf_dinov3(gated, seed=0):
    import torch
    import transformers

    config = transformers.DINOv3ViTConfig(
        hidden_size=HIDDEN,
        num_hidden_layers=1,
        num_attention_heads=HEADS,
        intermediate_size=MLP,
        image_size=32,
        patch_size=PATCH,
        num_register_tokens=4,
        use_gated_mlp=gated,
        hidden_act="silu" if gated else "gelu",
        rope_theta=50.0,
    )
    torch.manual_seed(seed)
    model = transformers.DINOv3ViTModel(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.2)
    return model


def hf_outputs(model, batch):
    import torch

    with torch.no_grad():
        return model(pixel_values=torch.from_numpy(batch.transpose(0, 3, 1, 2))).pooler_output.numpy()


@pytest.mark.parametrize("gated", [False, True], ids=["mlp", "swiglu"])
def test_transformers_dinov3_both_ways(gated, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    reference = hf_dinov3(gated)
    reference.save_pretrained(tmp_path / "hf")
    model = build_from_checkpoint(tmp_path / "hf", include_preprocessing=False)
    assert model.rope == dict(rope_type="dinov3", temperature=50.0, rotate_half=True)
    assert (model.mlp_activation == "swiglu") == gated and model.layer_norm_epsilon == 1e-5
    batches = [images(32, 32), images(24, 40, seed=1)]
    for batch in batches:
        assert_close(reference_outputs(model, batch)[0], hf_outputs(reference, batch))
        with torch.no_grad():
            tokens = reference(pixel_values=torch.from_numpy(batch.transpose(0, 3, 1, 2))).last_hidden_state.numpy()
        final, _ = model.forward_intermediates(batch, indices=1, output_fmt="NLC")  # every token: registers, patches
        assert_close(to_numpy(final), tokens)
    export_weights(model, tmp_path / "out", "hf")
    convert_checkpoint(tmp_path / "hf", tmp_path / "converted", "hf")  # the same, from the file alone
    for folder in ("out", "converted"):
        again = transformers.DINOv3ViTModel.from_pretrained(tmp_path / folder).eval()
        assert (again.config.rope_theta, again.config.use_gated_mlp, again.config.key_bias) == (50.0, gated, False)
        for batch in batches:
            assert_close(hf_outputs(again, batch), hf_outputs(reference, batch))


# ---------------------------------------------------------------- DINOv3's own files (facebookresearch/dinov3)


def upstream_tensors(reference, base):
    """timm's DINOv3 state dict under the names of DINOv3's own files (timm's `checkpoint_filter_fn` reversed)."""
    state = timm_reference.state_dict_numpy(reference)
    renames = (("reg_token", "storage_tokens"), ("gamma_1", "ls1.gamma"), ("gamma_2", "ls2.gamma"))
    renames += (("fc1_g", "w1"), ("fc1_x", "w2"), ("mlp.fc2", "mlp.w3"))
    tensors = {}
    for name, value in state.items():
        if name.endswith(("q_bias", "v_bias")):
            continue
        for old, new in renames:
            name = name.replace(old, new)
        tensors[name] = value
    for block in sorted({name.rsplit(".attn.", 1)[0] for name in state if name.endswith("attn.q_bias")}):
        q, v = state[f"{block}.attn.q_bias"], state[f"{block}.attn.v_bias"]
        tensors[f"{block}.attn.qkv.bias"] = np.concatenate([q, np.full_like(q, 3.0), v])  # the mask zeroes the key
        tensors[f"{block}.attn.qkv.bias_mask"] = np.concatenate([np.ones_like(q), np.zeros_like(q), np.ones_like(v)])
    head_dim = reference.embed_dim // reference.blocks[0].attn.num_heads
    periods = base ** (np.arange(head_dim // 4) / (head_dim // 4))
    import ml_dtypes

    tensors["rope_embed.periods"] = periods.astype(ml_dtypes.bfloat16).astype("float32")  # stored in bf16
    tensors["mask_token"] = np.zeros((1, reference.embed_dim), "float32")
    return tensors


def test_dinov3s_own_files_load_with_a_name(tmp_path):
    reference = saved("vit_small_plus_patch16_dinov3_qkvb", tmp_path / "timm")
    file = io.write_safetensors(tmp_path / "dinov3_vits16plus.safetensors", upstream_tensors(reference, 100.0))
    with pytest.raises(CheckpointError, match="unknown"):
        build_from_checkpoint(file)
    name = "vit_small_plus_patch16_dinov3_qkvb"
    model = build_from_checkpoint(file, name, include_preprocessing=False)
    assert model.pooling == "token" and model.num_heads == 2  # upstream pools the class token
    for batch in (images(48, 48), images(32, 64, seed=1)):
        expected = timm_reference.run_torch(reference.forward_features, batch)[:, 0]
        assert_close(reference_outputs(model, batch)[0], expected)
    other = io.write_safetensors(tmp_path / "other.safetensors", upstream_tensors(reference, 10.0))
    with pytest.raises(CheckpointError, match="periods") as error:
        build_from_checkpoint(other, name)
    assert "\n" not in str(error.value)
