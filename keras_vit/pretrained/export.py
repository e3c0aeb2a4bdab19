"""Exporting a keras_vit model's weights to the timm, Hugging Face or official layout.

`export_weights(model, path, "hf")` writes a folder that `transformers`' `ViTForImageClassification` (or `ViTModel`)
opens; `"timm"` a `model.safetensors` for timm's `VisionTransformer`; `"official"` the vit_jax `.npz`. The MLP
activation and LayerNorm epsilon travel in the `config.json` and the safetensors metadata (the official layout
refuses QuickGELU and other epsilons); options the target has no notion of (`pooling="gap"`) are the user's to
reproduce there.
"""

import os

import keras
import numpy as np

from keras_vit.layers.transformer import patch_grid
from keras_vit.models import variants
from keras_vit.models.vit import find_vit
from keras_vit.pretrained import build, converters, io, loader
from keras_vit.utils import files, validation


def model_weights(model):
    """Returns `{variable path: np.ndarray}` of a keras_vit model."""
    return {variable.path: keras.ops.convert_to_numpy(variable).astype(np.float32) for variable in model.weights}


def hf_config(architecture, weights):
    """The `transformers` `config.json` for these weights of a model of `architecture` (its arguments)."""
    grid, patch = architecture["embedding_grid"], architecture["patch_size"]
    if patch[0] != patch[1]:
        raise ValueError(f"transformers needs square patches. Received: patch_size={patch}")
    image_size = [grid[0] * patch[0], grid[1] * patch[1]]
    layout = converters.writing_layout(weights, "hf")
    if layout.rope:
        return _dinov3_config(architecture, weights, layout, image_size)
    mlp_ratio = architecture["mlp_dim"] / architecture["hidden_dim"]
    if layout.gated_mlp:
        # transformers' DINOv2 takes an integer mlp_ratio; its SwiGLU is two thirds as wide, rounded up to 8.
        gated_width, hidden_dim = int(weights["encoder_block_0/mlp/fc2/kernel"].shape[0]), architecture["hidden_dim"]
        mlp_ratio = float(max(1, round(1.5 * gated_width / hidden_dim)))
        if (int(int(hidden_dim * mlp_ratio) * 2 / 3) + 7) // 8 * 8 != gated_width:
            raise ValueError(f"transformers' DINOv2 has no SwiGLU {gated_width} wide at hidden size {hidden_dim}.")
    activation = architecture.get("mlp_activation", "gelu")  # "gelu" and "quick_gelu" are transformers' names too
    config = {
        "model_type": layout.config["model_type"],
        "architectures": layout.config["architectures"],
        "hidden_size": architecture["hidden_dim"],
        "num_hidden_layers": architecture["num_layers"],
        "num_attention_heads": architecture["num_heads"],
        "intermediate_size": architecture["mlp_dim"],
        "mlp_ratio": int(mlp_ratio) if mlp_ratio.is_integer() else mlp_ratio,  # DINOv2's MLP width
        "hidden_act": {"gelu_tanh": "gelu_pytorch_tanh"}.get(activation, activation),
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "initializer_range": 0.02,
        "layer_norm_eps": architecture.get("layer_norm_epsilon", 1e-6),
        "num_register_tokens": architecture.get("num_register_tokens", 0),
        "image_size": image_size[0] if image_size[0] == image_size[1] else image_size,
        "patch_size": patch[0],
        "num_channels": int(weights["patch_embedding/projection/kernel"].shape[2]),
        "qkv_bias": True,
        "encoder_stride": patch[0],
    }
    if layout.gated_mlp:
        config.update(use_swiglu_ffn=True, hidden_act="gelu")  # unused by its SwiGLU; the Hub's files say gelu
    if "head/kernel" in weights:
        classes = int(weights["head/kernel"].shape[1])
        config["id2label"] = {str(i): f"LABEL_{i}" for i in range(classes)}
        config["label2id"] = {f"LABEL_{i}": i for i in range(classes)}
    return config


def _dinov3_config(architecture, weights, layout, image_size):
    """transformers' `DINOv3ViTConfig` of a model built with DINOv3's options (its `rope` is DINOv3's)."""
    rope = architecture["rope"]
    temperature = float(rope.get("temperature", loader.ROPE_DEFAULTS["temperature"]))
    if loader.rope_key(rope) != loader.rope_key(dict(loader.DINOV3_ROPE, temperature=temperature)):
        raise ValueError(f"transformers' DINOv3 computes DINOv3's RoPE only. Received: rope={rope}")
    gated, biases = layout.gated_mlp, "encoder_block_0/attention/qkv/bias" in weights
    activation = architecture.get("mlp_activation", "gelu")
    return {
        **layout.config,
        "hidden_size": architecture["hidden_dim"],
        "num_hidden_layers": architecture["num_layers"],
        "num_attention_heads": architecture["num_heads"],
        "intermediate_size": int(weights["encoder_block_0/mlp/fc2/kernel"].shape[0]),  # a SwiGLU's gated width
        "hidden_act": "silu" if gated else {"gelu_tanh": "gelu_pytorch_tanh"}.get(activation, activation),
        "layer_norm_eps": architecture.get("layer_norm_epsilon", 1e-6),
        "rope_theta": temperature,
        "image_size": image_size[0] if image_size[0] == image_size[1] else image_size,
        "patch_size": architecture["patch_size"][0],
        "num_channels": int(weights["patch_embedding/projection/kernel"].shape[2]),
        "num_register_tokens": architecture.get("num_register_tokens", 0),
        "use_gated_mlp": gated,
        **dict(query_bias=biases, key_bias=False, value_bias=biases, proj_bias=True, mlp_bias=True),
        "layerscale_value": 1.0,
    }


def export_weights(model, path, format="hf", replace=True):
    """Writes a keras_vit model's weights in another library's layout; returns the weights file's path.

    Args:
        model: a keras_vit `VisionTransformer`, or a model with one inside.
        path: for `"hf"` a folder (`model.safetensors` and `config.json`), for `"timm"` a `.safetensors`
            file, for `"official"` an `.npz` file.
        format: `"hf"`, `"timm"` or `"official"`.
        replace: `False`: never replace what is at `path` (`FileExistsError`).

    Example:

    >>> model = keras_vit.VisionTransformer(patch_size=8, hidden_dim=32, num_layers=1,
    ...     num_heads=2, mlp_dim=64, input_shape=(32, 32, 3), classes=10)
    >>> import os, tempfile
    >>> path = export_weights(model, os.path.join(tempfile.mkdtemp(), "vit.safetensors"), "timm")
    """
    validation.one_of("format", format, converters.FORMATS)
    vit = find_vit(model)
    return write_weights(model_weights(vit), path, format, vit.architecture, replace=replace)


def write_weights(weights, path, format, architecture, replace=True):
    """Writes keras_vit-named `weights` of a model of `architecture` (its arguments) to `path` in `format`."""
    path = os.fspath(path)
    activation = architecture.get("mlp_activation", "gelu")
    epsilon = architecture.get("layer_norm_epsilon", 1e-6)
    if format == "official" and (activation == "quick_gelu" or epsilon != 1e-6):
        raise ValueError(
            f"The official layout is run with the JAX code's GELU and LayerNorm epsilon 1e-6: it cannot hold "
            f"mlp_activation={activation!r}, layer_norm_epsilon={epsilon}. Write the 'hf' or 'timm' layout."
        )
    rope, layout = architecture.get("rope"), converters.writing_layout(weights, format)
    if bool(rope) != bool(layout.rope):
        raise ValueError(
            f"The {format} layout keras_vit writes for these weights "
            + (
                f"has no rotary position embedding (rope={rope}): export a DINOv3-style model to 'hf'."
                if rope
                else "computes DINOv3's rotary position embedding, which this model (rope=None) has not."
            )
        )
    tensors = converters.from_keras(weights, format, num_heads=architecture["num_heads"])
    if format == "official":
        return io.write_npz(path, tensors, replace=replace)
    # The grid, activation and epsilon are recorded so that keras_vit reloads the model exactly.
    grid = architecture["embedding_grid"]
    metadata = {
        "format": "pt",
        "keras_vit.grid_size": f"{grid[0]},{grid[1]}",
        "keras_vit.mlp_activation": activation,
        "keras_vit.layer_norm_epsilon": repr(float(epsilon)),
    }
    if format == "timm":
        return io.write_safetensors(path, tensors, metadata, replace=replace)
    # Weights and config.json appear together or not at all: transformers cannot open a mix.
    with files.atomic_directory(path, replace=replace) as staged:
        io.write_safetensors(os.path.join(staged, "model.safetensors"), tensors, metadata)
        files.write_json(os.path.join(staged, "config.json"), hf_config(architecture, weights))
    return os.path.join(path, "model.safetensors")


def convert_checkpoint(src, dst, format=None, num_heads=None, image_size=None, replace=True):
    """Converts a checkpoint (or a `.keras` model) to another layout; returns `(path written, format)`.

    Args:
        src: a checkpoint (`.npz`, `.safetensors`, `save_pretrained` folder) or a `.keras` model file.
        dst: the output (see `export_weights`).
        format: `"hf"`, `"timm"`, `"official"`, or None: `.npz` official, `.safetensors` timm, else hf.
        num_heads: attention heads; None: the file's, else the variant table's for the hidden size (logged).
        image_size: `(height, width)` the position embedding is for; None takes it from the file.
        replace: `False`: never replace what is at `dst`.
    """
    src, dst = os.fspath(src), os.fspath(dst)
    if format is None:
        format = "official" if dst.endswith(".npz") else "timm" if dst.endswith(".safetensors") else "hf"
    validation.one_of("format", format, converters.FORMATS)
    # Every argument is checked before the checkpoint is read.
    num_heads = None if num_heads is None else validation.positive_int("num_heads", num_heads)
    image_size = None if image_size is None else validation.pair("image_size", image_size)
    if src.endswith(".keras"):
        from keras_vit.models import metadata

        return export_weights(metadata.load_classifier(src), dst, format, replace=replace), format
    checkpoint = loader.load_checkpoint(src)
    grid = None
    if image_size is not None:
        pixels = loader.pixels_per_token_of_weights(checkpoint.weights)
        grid = loader.checkpoint_grid(checkpoint, target_grid=patch_grid(image_size, pixels))
    # The activation and epsilon its config or timm model name says (the tensors do not show them).
    architecture = dict(checkpoint.architecture(num_heads, grid), **build.options_beyond_tensors(checkpoint))
    if architecture["embedding_grid"] is None:  # no position table: the default image's grid, for the config
        pixels = loader.pixels_per_token_of_weights(checkpoint.weights)
        architecture["embedding_grid"] = patch_grid(variants.DEFAULT_INPUT_SHAPE[:2], pixels)
    rope = loader.file_rope(checkpoint)[0]
    architecture["rope"] = None if rope is ... else rope
    loader.check_rope(checkpoint, architecture["rope"])  # a RoPE file whose RoPE is unknown is not converted
    return write_weights(checkpoint.weights, dst, format, architecture, replace=replace), format
