"""Checkpoint factories for the pretrained-weights tests, independent of `keras_vit.pretrained`.

Hugging Face files are written by `transformers` itself; the timm and official
`.npz` layouts by mapping a `transformers` state dict with the published
layouts' relations, written out again here rather than imported.
"""

import contextlib
import dataclasses
import functools
import http.server
import threading

import numpy as np

from keras_vit.models.variants import VARIANTS
from keras_vit.pretrained import download, registry

TINY = "T/8"  # A test-only variant registered with `register_variant`.


def register_variant(monkeypatch, name=TINY, hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64, patch_size=8):
    """Adds (or overrides) a variant in `keras_vit.models.variants.VARIANTS` for one test."""
    monkeypatch.setitem(
        VARIANTS,
        name,
        dict(hidden_dim=hidden_dim, num_layers=num_layers, num_heads=num_heads, mlp_dim=mlp_dim, patch_size=patch_size),
    )
    return name


def images(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype("float32")


def hf_config(hidden_dim=32, num_layers=2, num_heads=2, mlp_dim=64, image_size=32, patch_size=8, classes=5):
    from transformers import ViTConfig

    return ViTConfig(
        hidden_size=hidden_dim,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=mlp_dim,
        image_size=image_size,
        patch_size=patch_size,
        num_labels=classes,
        layer_norm_eps=1e-6,
        hidden_act="gelu",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def random_hf_model(config, classifier=True, pooler=False, seed=0, zero_class_position=False):
    """A `transformers` ViT with every parameter random (not the init's zeros and ones)."""
    import torch
    from transformers import ViTForImageClassification, ViTModel

    torch.manual_seed(seed)
    model = ViTForImageClassification(config) if classifier else ViTModel(config, add_pooling_layer=pooler)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "layernorm" in name and name.endswith("weight"):
                parameter.uniform_(0.5, 1.5)
            else:
                parameter.normal_(0.0, 0.2)
        if zero_class_position:
            # big_vision's layout has no position embedding for the class token.
            embeddings = model.vit.embeddings if classifier else model.embeddings
            embeddings.position_embeddings[:, 0] = 0.0
    return model.eval()


def hf_logits(model, inputs, interpolate=False):
    """The logits of a `transformers` ViT classifier on channels-last numpy images."""
    import torch

    pixels = torch.from_numpy(np.ascontiguousarray(inputs.transpose(0, 3, 1, 2)))
    with torch.no_grad():
        return model(pixels, interpolate_pos_encoding=interpolate).logits.numpy()


def hf_state(model):
    """The tensors as `save_pretrained` writes them: transformers 5 renames modules in memory, not in files."""
    import tempfile

    from safetensors.numpy import load_file

    with tempfile.TemporaryDirectory() as directory:
        model.save_pretrained(directory)
        return load_file(f"{directory}/model.safetensors")


def _strip(state):
    # ViTForImageClassification prefixes the backbone with "vit."
    return {name[4:] if name.startswith("vit.") else name: value for name, value in state.items()}


def num_layers_of(state):
    return len({name.split(".")[2] for name in state if name.startswith("encoder.layer.")})


def hf_to_timm_state(state):
    """timm names from a transformers state dict: fused (3D, D) qkv, (out, in) linears."""
    s = _strip(state)
    out = {
        "patch_embed.proj.weight": s["embeddings.patch_embeddings.projection.weight"],
        "patch_embed.proj.bias": s["embeddings.patch_embeddings.projection.bias"],
        "cls_token": s["embeddings.cls_token"],
        "pos_embed": s["embeddings.position_embeddings"],
        "norm.weight": s["layernorm.weight"],
        "norm.bias": s["layernorm.bias"],
    }
    for i in range(num_layers_of(s)):
        h, t = f"encoder.layer.{i}.", f"blocks.{i}."
        for kind in ("weight", "bias"):
            qkv = [s[h + f"attention.attention.{n}.{kind}"] for n in ("query", "key", "value")]
            out[t + f"attn.qkv.{kind}"] = np.concatenate(qkv, axis=0)
        for ours, theirs in (
            ("norm1", "layernorm_before"),
            ("norm2", "layernorm_after"),
            ("attn.proj", "attention.output.dense"),
            ("mlp.fc1", "intermediate.dense"),
            ("mlp.fc2", "output.dense"),
        ):
            out[t + ours + ".weight"] = s[h + theirs + ".weight"]
            out[t + ours + ".bias"] = s[h + theirs + ".bias"]
    if "classifier.weight" in s:
        out["head.weight"], out["head.bias"] = s["classifier.weight"], s["classifier.bias"]
    return out


OFFICIAL_LAYOUTS = ("plain", "opt_target", "big_vision", "scanned", "scanned_big_vision")


def hf_to_official_state(state, num_heads, layout="plain", zero_head_classes=None):
    """The official JAX `.npz` names and shapes from a transformers state dict.

    Args:
        layout: `"plain"` (vit_jax), `"opt_target"` (flax optimizer prefix and state), `"big_vision"`
            (`params/`, per-type numbering, `pos_embedding` without the class row), `"scanned"` or
            `"scanned_big_vision"` (blocks stacked on a leading axis).
        zero_head_classes: add an all-zero head of this size, as the original ImageNet-21k files have.
    """
    s = _strip(state)
    big_vision = "big_vision" in layout
    hidden = s["embeddings.cls_token"].shape[-1]
    head_dim = hidden // num_heads
    ln1, mha, ln2, mlp = ("LayerNorm_0", "MultiHeadDotProductAttention_1", "LayerNorm_2", "MlpBlock_3")
    if big_vision:
        mha, ln2, mlp = "MultiHeadDotProductAttention_0", "LayerNorm_1", "MlpBlock_0"
    out = {
        "embedding/kernel": s["embeddings.patch_embeddings.projection.weight"].transpose(2, 3, 1, 0),
        "embedding/bias": s["embeddings.patch_embeddings.projection.bias"],
        "cls": s["embeddings.cls_token"],
        "Transformer/encoder_norm/scale": s["layernorm.weight"],
        "Transformer/encoder_norm/bias": s["layernorm.bias"],
    }
    posemb = s["embeddings.position_embeddings"]
    if big_vision:
        assert np.all(posemb[:, 0] == 0), "big_vision cannot express a class-token position embedding"
        out["pos_embedding"] = posemb[:, 1:]
    else:
        out["Transformer/posembed_input/pos_embedding"] = posemb
    blocks = []
    for i in range(num_layers_of(s)):
        h = f"encoder.layer.{i}."
        block = {
            f"{ln1}/scale": s[h + "layernorm_before.weight"],
            f"{ln1}/bias": s[h + "layernorm_before.bias"],
            f"{ln2}/scale": s[h + "layernorm_after.weight"],
            f"{ln2}/bias": s[h + "layernorm_after.bias"],
            f"{mha}/out/kernel": s[h + "attention.output.dense.weight"].T.reshape(num_heads, head_dim, hidden),
            f"{mha}/out/bias": s[h + "attention.output.dense.bias"],
            f"{mlp}/Dense_0/kernel": s[h + "intermediate.dense.weight"].T,
            f"{mlp}/Dense_0/bias": s[h + "intermediate.dense.bias"],
            f"{mlp}/Dense_1/kernel": s[h + "output.dense.weight"].T,
            f"{mlp}/Dense_1/bias": s[h + "output.dense.bias"],
        }
        for n in ("query", "key", "value"):
            block[f"{mha}/{n}/kernel"] = s[h + f"attention.attention.{n}.weight"].T.reshape(hidden, num_heads, head_dim)
            block[f"{mha}/{n}/bias"] = s[h + f"attention.attention.{n}.bias"].reshape(num_heads, head_dim)
        blocks.append(block)
    if layout.startswith("scanned"):
        for name in blocks[0]:
            out[f"Transformer/encoderblock/{name}"] = np.stack([block[name] for block in blocks])
    else:
        for i, block in enumerate(blocks):
            out.update({f"Transformer/encoderblock_{i}/{name}": value for name, value in block.items()})
    if "pooler.dense.weight" in s:
        out["pre_logits/kernel"], out["pre_logits/bias"] = s["pooler.dense.weight"].T, s["pooler.dense.bias"]
    if "classifier.weight" in s:
        out["head/kernel"], out["head/bias"] = s["classifier.weight"].T, s["classifier.bias"]
    elif zero_head_classes:
        width = out["pre_logits/bias"].shape[0] if "pre_logits/bias" in out else hidden
        out["head/kernel"] = np.zeros((width, zero_head_classes), "float32")
        out["head/bias"] = np.zeros((zero_head_classes,), "float32")
    if layout == "opt_target":
        out = {f"opt/target/{name}": value for name, value in out.items()}
        out["opt/state/step"] = np.asarray(10000)
    elif big_vision:
        out = {f"params/{name}": value for name, value in out.items()}
    return out


def write_npz(path, tensors):
    np.savez(path, **tensors)
    return str(path)


def write_safetensors(path, tensors, metadata=None):
    from safetensors.numpy import save_file

    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path), metadata=metadata)
    return str(path)


def keras_weights(model):
    import keras

    return {variable.path: keras.ops.convert_to_numpy(variable) for variable in model.weights}


def outputs(model, inputs):
    """The model's outputs on `inputs`, images in [-1, 1] as the references take them.

    A model that scales pixels itself gets them as [0, 255] pixels, so every parity test also checks its scaling.
    """
    import keras

    from keras_vit.layers import PixelScaling

    if any(isinstance(layer, PixelScaling) for layer in model.layers):
        inputs = (inputs + 1.0) * 127.5
    return keras.ops.convert_to_numpy(model(inputs, training=False))


def replace_row(monkeypatch, info, **changes):
    """Puts the registry row `info` with `changes` (a tiny size) in its place; returns the new row."""
    row = dataclasses.replace(info, **changes)
    monkeypatch.setattr(registry, "CHECKPOINTS", tuple(row if i == info else i for i in registry.CHECKPOINTS))
    return row


def fake_hub(monkeypatch, path):
    """Replaces the Hub fetch by one that returns `path` (or `path(repo_id, filename)`); returns the requests."""
    requested = []

    def fake_hf_download(repo_id, filename="model.safetensors", revision=None, **kwargs):
        requested.append((repo_id, filename))
        return path(repo_id, filename) if callable(path) else path

    monkeypatch.setattr(download, "hf_download", fake_hf_download)
    return requested


class _QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass


@contextlib.contextmanager
def serve_folder(directory):
    """Serves the files of `directory` over http on 127.0.0.1; yields the base URL."""
    handler = functools.partial(_QuietFiles, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def timm_saved_like_the_hub(name, folder, **timm_arguments):
    """timm's architecture `name` (depth 1, `timm_arguments`, by default three patches a side) with random weights,
    saved to `folder` as the Hub holds it: `model.safetensors` and timm's `config.json` without `model_args`.
    Returns the timm model, in eval mode."""
    import json
    import os

    from tests import timm_reference

    timm = timm_reference.import_timm()
    from timm.models._hub import save_for_hf

    if "img_size" not in timm_arguments:
        patch = timm.create_model(name, pretrained=False, depth=1, **timm_arguments).patch_embed.patch_size[0]
        timm_arguments["img_size"] = 3 * patch
    model = timm.create_model(name, pretrained=False, depth=1, **timm_arguments)
    model = timm_reference.randomize_torch(model.eval())
    save_for_hf(model, folder, safe_serialization=True)
    config_path = os.path.join(folder, "config.json")
    with open(config_path) as handle:
        config = json.load(handle)
    config.pop("model_args", None)  # the Hub's configs name the architecture only
    with open(config_path, "w") as handle:
        json.dump(config, handle)
    return model
