"""DINOv3 as options of `VisionTransformer` (no position table, RoPE on the patch grid, four registers, layer scale,
a key without bias) against transformers' `DINOv3ViTModel` with random weights, at its size and a non-square one."""

import numpy as np
import pytest

import keras_vit
from tests.helpers import to_numpy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

HIDDEN, HEADS, LAYERS, MLP, PATCH = 64, 4, 2, 128, 8


def _reference(gated):
    config = transformers.DINOv3ViTConfig(
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=MLP,
        image_size=32,
        patch_size=PATCH,
        num_register_tokens=4,
        use_gated_mlp=gated,
        hidden_act="silu" if gated else "gelu",
        layerscale_value=0.5,
    )
    torch.manual_seed(0)
    model = transformers.DINOv3ViTModel(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.2)
    return model


def _keras_model(reference, gated):
    model = keras_vit.VisionTransformer(
        patch_size=PATCH,
        hidden_dim=HIDDEN,
        num_layers=LAYERS,
        num_heads=HEADS,
        mlp_dim=MLP,
        include_top=False,
        include_preprocessing=False,
        input_shape=(None, None, 3),
        pooling="token",
        num_register_tokens=4,
        position_embedding=False,
        rope=dict(rope_type="dinov3", temperature=reference.config.rope_theta, rotate_half=True),
        layer_scale_init=1.0,
        layer_norm_epsilon=reference.config.layer_norm_eps,
        mlp_activation="swiglu" if gated else "gelu",
    )
    state = {name: value.numpy() for name, value in reference.state_dict().items()}
    values = {
        "patch_embedding/projection/kernel": state["embeddings.patch_embeddings.weight"].transpose(2, 3, 1, 0),
        "patch_embedding/projection/bias": state["embeddings.patch_embeddings.bias"],
        "class_token/token": state["embeddings.cls_token"],
        "register_tokens/token": state["embeddings.register_tokens"],
        "encoder_norm/gamma": state["norm.weight"],
        "encoder_norm/beta": state["norm.bias"],
    }
    for i in range(LAYERS):
        block = f"model.layer.{i}."
        attention = block + "attention."
        mlp = [f"{block}mlp.{name}" for name in (("gate_proj", "up_proj") if gated else ("up_proj",))]
        values.update(
            {
                f"encoder_block_{i}/norm1/gamma": state[block + "norm1.weight"],
                f"encoder_block_{i}/norm1/beta": state[block + "norm1.bias"],
                f"encoder_block_{i}/norm2/gamma": state[block + "norm2.weight"],
                f"encoder_block_{i}/norm2/beta": state[block + "norm2.bias"],
                f"encoder_block_{i}/attention/qkv/kernel": np.concatenate(
                    [state[f"{attention}{n}_proj.weight"].T for n in "qkv"], axis=1
                ),
                # DINOv3's key has no bias: zeros in its third of the fused bias.
                f"encoder_block_{i}/attention/qkv/bias": np.concatenate(
                    [state[attention + "q_proj.bias"], np.zeros(HIDDEN, "float32"), state[attention + "v_proj.bias"]]
                ),
                f"encoder_block_{i}/attention/output/kernel": state[attention + "o_proj.weight"].T,
                f"encoder_block_{i}/attention/output/bias": state[attention + "o_proj.bias"],
                f"encoder_block_{i}/layer_scale1": state[block + "layer_scale1.lambda1"],
                f"encoder_block_{i}/layer_scale2": state[block + "layer_scale2.lambda1"],
                f"encoder_block_{i}/mlp/fc1/kernel": np.concatenate([state[n + ".weight"].T for n in mlp], axis=1),
                f"encoder_block_{i}/mlp/fc1/bias": np.concatenate([state[n + ".bias"] for n in mlp]),
                f"encoder_block_{i}/mlp/fc2/kernel": state[block + "mlp.down_proj.weight"].T,
                f"encoder_block_{i}/mlp/fc2/bias": state[block + "mlp.down_proj.bias"],
            }
        )
    weights = {variable.path: variable for variable in model.weights}
    assert sorted(weights) == sorted(values)
    for path, value in values.items():
        weights[path].assign(value)
    return model


@pytest.mark.parametrize("gated", [False, True], ids=["mlp", "swiglu"])
def test_dinov3_matches_transformers_at_any_size(gated):
    reference = _reference(gated)
    model = _keras_model(reference, gated)
    for height, width in ((32, 32), (24, 40)):
        images = np.random.default_rng(height).standard_normal((2, height, width, 3)).astype("float32")
        with torch.no_grad():
            expected = reference(pixel_values=torch.from_numpy(images.transpose(0, 3, 1, 2)))
        tokens = expected.last_hidden_state.numpy()
        scale = np.abs(tokens).max()
        np.testing.assert_allclose(to_numpy(model(images)) / scale, expected.pooler_output.numpy() / scale, atol=1e-4)
        features, _ = model.forward_intermediates(images, indices=[0], output_fmt="NLC")
        np.testing.assert_allclose(to_numpy(features) / scale, tokens / scale, atol=1e-4)
