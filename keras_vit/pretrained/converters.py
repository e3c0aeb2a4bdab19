"""Converting checkpoint layouts to and from keras_vit's weight names.

keras_vit names every weight by its Keras variable path, e.g.
`encoder_block_3/attention/qkv/kernel`. A converter maps each tensor of a
published layout to those names with strict accounting: every name the
model needs must be found (else "missing"), every tensor in the file must
be used (else "unexpected"), and both lists are reported together in one
`CheckpointMismatchError`. Conversion is pure NumPy, so it is identical on
every backend.

Layouts (see DESIGN.md section 3):

- `official`: the JAX `.npz` of google-research/vision_transformer, with its
  variants: a leading `opt/target/` (flax optimizer checkpoints; `opt/state/`
  is ignored), big_vision's `params/` prefix and block naming (`LayerNorm_0/1`,
  `MultiHeadDotProductAttention_0`, `MlpBlock_0`, a top-level `pos_embedding`
  without the class-token row), scanned blocks (`Transformer/encoderblock/...`
  with a leading layer axis), with or without `pre_logits` and `head`.
- `timm`: timm's `VisionTransformer` state dict (PyTorch `(out, in)` linears,
  fused `attn.qkv`).
- `hf`: Hugging Face `transformers` `ViTModel` / `ViTForImageClassification`
  (separate query/key/value, optional `pooler` = pre_logits, `classifier`).

The correspondences: our qkv kernel `(D, 3D)` is `[q | k | v]` with each part
in `(head, head_dim)` order, i.e. the official `query/kernel (D, H, Dh)`
reshaped to `(D, H*Dh)`, or timm's `qkv.weight (3D, D)` transposed; the
attention output kernel `(D, D)` is the official `out/kernel (H, Dh, D)`
reshaped; the patch kernel is HWIO (official as is, PyTorch `(D, C, p, p)`
transposed by `(2, 3, 1, 0)`).
"""

import dataclasses
import re

import numpy as np

from keras_vit.pretrained.errors import CheckpointFormatError, CheckpointMismatchError

FORMATS = ("official", "timm", "hf")
_LIST_LIMIT = 12


def _block(index, name):
    return f"encoder_block_{index}/{name}"


def _summarise(names):
    names = list(names)
    shown = ", ".join(str(name) for name in names[:_LIST_LIMIT])
    return shown + (f", ... ({len(names) - _LIST_LIMIT} more)" if len(names) > _LIST_LIMIT else "")


def mismatch_error(what, missing=(), unexpected=(), mismatched=(), hint=""):
    """Builds one `CheckpointMismatchError` that lists every problem."""
    parts = [what]
    if missing:
        parts.append(f"Missing ({len(missing)}): {_summarise(missing)}.")
    if unexpected:
        parts.append(f"Unexpected ({len(unexpected)}): {_summarise(unexpected)}.")
    if mismatched:
        shown = [f"{name} {tuple(got)} vs model {tuple(want)}" for name, got, want in mismatched]
        parts.append(f"Wrong shapes ({len(mismatched)}): {_summarise(shown)}.")
    if hint:
        parts.append(hint)
    return CheckpointMismatchError(" ".join(parts), missing, unexpected, mismatched)


class _Source:
    """A checkpoint dict that remembers which tensors were used and which were missing."""

    def __init__(self, tensors, layout, ignore=()):
        self.tensors = dict(tensors)
        self.layout = layout
        self.ignored = [name for name in self.tensors if name.startswith(tuple(ignore))] if ignore else []
        self.used = set(self.ignored)
        self.missing = []

    def has(self, name):
        return name in self.tensors

    def take(self, name):
        if name not in self.tensors:
            self.missing.append(name)
            return None
        self.used.add(name)
        return np.asarray(self.tensors[name])

    def finish(self, weights):
        unexpected = sorted(set(self.tensors) - self.used)
        if self.missing or unexpected:
            raise mismatch_error(
                f"The checkpoint does not have the {self.layout} ViT layout keras_vit expects.",
                missing=self.missing,
                unexpected=unexpected,
                hint="Unexpected tensors usually mean a different architecture (distillation token, "
                "layer scale, MAP head, hybrid ResNet stem, ...), which keras_vit does not build.",
            )
        if any(value is None for value in weights.values()):  # pragma: no cover - guarded by `missing`
            raise AssertionError("converter produced None without recording it as missing")
        return weights


def _count_blocks(names, pattern):
    indices = {int(match.group(1)) for name in names if (match := re.match(pattern, name))}
    if indices and indices != set(range(len(indices))):
        raise mismatch_error(
            f"The checkpoint's transformer blocks are not numbered 0..N-1: found {sorted(indices)}.",
            missing=[str(i) for i in sorted(set(range(max(indices) + 1)) - indices)],
        )
    return len(indices)


def _safe(convert, name, *arrays):
    # A malformed tensor (wrong rank, say) must become a clear error naming it,
    # not a reshape traceback from deep inside NumPy.
    if any(array is None for array in arrays):
        return None
    try:
        return convert(*arrays)
    except (ValueError, IndexError) as error:
        shapes = [tuple(np.shape(array)) for array in arrays]
        raise mismatch_error(f"Cannot convert {name} from tensors of shapes {shapes}: {error}.") from error


# --------------------------------------------------------------------------- official

_OFFICIAL_PREFIXES = ("opt/target/", "params/", "")


def _official_prefix(tensors):
    for prefix in _OFFICIAL_PREFIXES:
        if f"{prefix}embedding/kernel" in tensors:
            return prefix
    return None


def official_to_keras(tensors):
    """Converts an official JAX `.npz` dict (any layout variant) to keras_vit names.

    Returns:
        `(weights, layout)`: the dict keyed by keras_vit paths, and a short
        description of the layout found (for logs).
    """
    prefix = _official_prefix(tensors)
    # Flax optimizer checkpoints keep the optimizer's state next to the target.
    ignore = ("opt/state/",) if prefix == "opt/target/" else ()
    source = _Source(tensors, "official .npz", ignore=ignore)
    p = lambda name: prefix + name  # noqa: E731
    scanned = any(name.startswith(p("Transformer/encoderblock/")) for name in tensors)
    block_root = p("Transformer/encoderblock/") if scanned else None
    # vit_jax numbers a block's submodules in order (LayerNorm_0, MHA_1, LayerNorm_2,
    # MlpBlock_3); big_vision numbers them per type (LayerNorm_0/1, MHA_0, MlpBlock_0).
    probe = block_root or p("Transformer/encoderblock_0/")
    big_vision = f"{probe}MultiHeadDotProductAttention_0/query/kernel" in tensors
    ln1, mha, ln2, mlp = (
        ("LayerNorm_0", "MultiHeadDotProductAttention_0", "LayerNorm_1", "MlpBlock_0")
        if big_vision
        else ("LayerNorm_0", "MultiHeadDotProductAttention_1", "LayerNorm_2", "MlpBlock_3")
    )
    if scanned:
        scale = tensors.get(f"{block_root}{ln1}/scale")
        num_layers = 0 if scale is None else int(np.shape(scale)[0])
    else:
        num_layers = _count_blocks(tensors, re.escape(p("Transformer/encoderblock_")) + r"(\d+)/")

    stacked = {}

    def block_tensor(index, name):
        if not scanned:
            return source.take(p(f"Transformer/encoderblock_{index}/{name}"))
        key = block_root + name
        if key not in stacked:
            stacked[key] = source.take(key)
        value = stacked[key]
        return None if value is None else value[index]

    weights = {
        "patch_embedding/projection/kernel": source.take(p("embedding/kernel")),
        "patch_embedding/projection/bias": source.take(p("embedding/bias")),
    }
    if not source.has(p("cls")):
        raise CheckpointFormatError(
            "This official checkpoint has no class token (`cls`): it was trained with global average "
            "pooling and no class token, which keras_vit's ViT (always with a class token) cannot reproduce."
        )
    weights["class_token/token"] = source.take(p("cls"))
    if source.has(p("Transformer/posembed_input/pos_embedding")):
        weights["position_embedding/embedding"] = source.take(p("Transformer/posembed_input/pos_embedding"))
    else:
        # big_vision adds the position embedding before prepending the class
        # token, so the class token gets none: a zero row is the same model.
        posemb = source.take(p("pos_embedding"))
        weights["position_embedding/embedding"] = _safe(
            lambda x: np.concatenate([np.zeros_like(x[:, :1]), x], axis=1), "pos_embedding", posemb
        )
    for i in range(num_layers):
        weights[_block(i, "norm1/gamma")] = block_tensor(i, f"{ln1}/scale")
        weights[_block(i, "norm1/beta")] = block_tensor(i, f"{ln1}/bias")
        parts = [block_tensor(i, f"{mha}/{n}/kernel") for n in ("query", "key", "value")]
        weights[_block(i, "attention/qkv/kernel")] = _safe(
            lambda *k: np.concatenate([x.reshape(x.shape[0], -1) for x in k], axis=1), f"block {i} qkv", *parts
        )
        parts = [block_tensor(i, f"{mha}/{n}/bias") for n in ("query", "key", "value")]
        weights[_block(i, "attention/qkv/bias")] = _safe(
            lambda *b: np.concatenate([x.reshape(-1) for x in b]), f"block {i} qkv bias", *parts
        )
        weights[_block(i, "attention/output/kernel")] = _safe(
            lambda x: x.reshape(-1, x.shape[-1]), f"block {i} out", block_tensor(i, f"{mha}/out/kernel")
        )
        weights[_block(i, "attention/output/bias")] = block_tensor(i, f"{mha}/out/bias")
        weights[_block(i, "norm2/gamma")] = block_tensor(i, f"{ln2}/scale")
        weights[_block(i, "norm2/beta")] = block_tensor(i, f"{ln2}/bias")
        for j, dense in enumerate(("fc1", "fc2")):
            weights[_block(i, f"mlp/{dense}/kernel")] = block_tensor(i, f"{mlp}/Dense_{j}/kernel")
            weights[_block(i, f"mlp/{dense}/bias")] = block_tensor(i, f"{mlp}/Dense_{j}/bias")
    weights["encoder_norm/gamma"] = source.take(p("Transformer/encoder_norm/scale"))
    weights["encoder_norm/beta"] = source.take(p("Transformer/encoder_norm/bias"))
    for ours, theirs in (("pre_logits", "pre_logits"), ("head", "head")):
        if source.has(p(f"{theirs}/kernel")) or source.has(p(f"{theirs}/bias")):
            weights[f"{ours}/kernel"] = source.take(p(f"{theirs}/kernel"))
            weights[f"{ours}/bias"] = source.take(p(f"{theirs}/bias"))
    layout = (
        f"official .npz ({'big_vision' if big_vision else 'vit_jax'} naming, "
        f"{'scanned' if scanned else 'per-block'}, prefix {prefix or '(none)'!r})"
    )
    return source.finish(weights), layout


def keras_to_official(weights, num_heads):
    """Converts keras_vit weights to the official (vit_jax, plain) `.npz` layout."""
    out = {
        "embedding/kernel": weights["patch_embedding/projection/kernel"],
        "embedding/bias": weights["patch_embedding/projection/bias"],
        "cls": weights["class_token/token"],
        "Transformer/posembed_input/pos_embedding": weights["position_embedding/embedding"],
        "Transformer/encoder_norm/scale": weights["encoder_norm/gamma"],
        "Transformer/encoder_norm/bias": weights["encoder_norm/beta"],
    }
    for i in range(num_blocks(weights)):
        root = f"Transformer/encoderblock_{i}/"
        hidden = weights[_block(i, "norm1/gamma")].shape[0]
        head_dim = hidden // num_heads
        kernels = np.split(weights[_block(i, "attention/qkv/kernel")], 3, axis=1)
        biases = np.split(weights[_block(i, "attention/qkv/bias")], 3)
        for name, kernel, bias in zip(("query", "key", "value"), kernels, biases):
            out[f"{root}MultiHeadDotProductAttention_1/{name}/kernel"] = kernel.reshape(hidden, num_heads, head_dim)
            out[f"{root}MultiHeadDotProductAttention_1/{name}/bias"] = bias.reshape(num_heads, head_dim)
        out[f"{root}MultiHeadDotProductAttention_1/out/kernel"] = weights[_block(i, "attention/output/kernel")].reshape(
            num_heads, head_dim, hidden
        )
        out[f"{root}MultiHeadDotProductAttention_1/out/bias"] = weights[_block(i, "attention/output/bias")]
        for ours, theirs in (("norm1", "LayerNorm_0"), ("norm2", "LayerNorm_2")):
            out[f"{root}{theirs}/scale"] = weights[_block(i, f"{ours}/gamma")]
            out[f"{root}{theirs}/bias"] = weights[_block(i, f"{ours}/beta")]
        for j, dense in enumerate(("fc1", "fc2")):
            out[f"{root}MlpBlock_3/Dense_{j}/kernel"] = weights[_block(i, f"mlp/{dense}/kernel")]
            out[f"{root}MlpBlock_3/Dense_{j}/bias"] = weights[_block(i, f"mlp/{dense}/bias")]
    for name in ("pre_logits", "head"):
        if f"{name}/kernel" in weights:
            out[f"{name}/kernel"] = weights[f"{name}/kernel"]
            out[f"{name}/bias"] = weights[f"{name}/bias"]
    return out


# --------------------------------------------------------------------------- timm / HF shared


def _torch_conv_to_hwio(x):
    return np.transpose(x, (2, 3, 1, 0))


def _hwio_to_torch_conv(x):
    return np.transpose(x, (3, 2, 0, 1))


def _t(x):
    return None if x is None else np.ascontiguousarray(np.transpose(x))


# --------------------------------------------------------------------------- timm


def timm_to_keras(tensors):
    """Converts a timm `VisionTransformer` state dict to keras_vit names."""
    source = _Source(tensors, "timm")
    num_layers = _count_blocks(tensors, r"blocks\.(\d+)\.")
    weights = {
        "patch_embedding/projection/kernel": _safe(
            _torch_conv_to_hwio, "patch_embed.proj.weight", source.take("patch_embed.proj.weight")
        ),
        "patch_embedding/projection/bias": source.take("patch_embed.proj.bias"),
        "class_token/token": source.take("cls_token"),
        "position_embedding/embedding": source.take("pos_embed"),
    }
    for i in range(num_layers):
        b = f"blocks.{i}."
        weights[_block(i, "norm1/gamma")] = source.take(b + "norm1.weight")
        weights[_block(i, "norm1/beta")] = source.take(b + "norm1.bias")
        # timm's fused qkv has the same [q | k | v] x (head, head_dim) order as ours.
        weights[_block(i, "attention/qkv/kernel")] = _t(source.take(b + "attn.qkv.weight"))
        weights[_block(i, "attention/qkv/bias")] = source.take(b + "attn.qkv.bias")
        weights[_block(i, "attention/output/kernel")] = _t(source.take(b + "attn.proj.weight"))
        weights[_block(i, "attention/output/bias")] = source.take(b + "attn.proj.bias")
        weights[_block(i, "norm2/gamma")] = source.take(b + "norm2.weight")
        weights[_block(i, "norm2/beta")] = source.take(b + "norm2.bias")
        for dense in ("fc1", "fc2"):
            weights[_block(i, f"mlp/{dense}/kernel")] = _t(source.take(b + f"mlp.{dense}.weight"))
            weights[_block(i, f"mlp/{dense}/bias")] = source.take(b + f"mlp.{dense}.bias")
    weights["encoder_norm/gamma"] = source.take("norm.weight")
    weights["encoder_norm/beta"] = source.take("norm.bias")
    # timm before 0.6 kept the representation layer as `pre_logits.fc`.
    for ours, theirs in (("pre_logits", "pre_logits.fc"), ("head", "head")):
        if source.has(f"{theirs}.weight") or source.has(f"{theirs}.bias"):
            weights[f"{ours}/kernel"] = _t(source.take(f"{theirs}.weight"))
            weights[f"{ours}/bias"] = source.take(f"{theirs}.bias")
    return source.finish(weights), "timm safetensors"


def keras_to_timm(weights):
    """Converts keras_vit weights to timm's `VisionTransformer` state-dict names.

    Raises:
        ValueError: the weights have `pre_logits`, which timm's ViT no longer has.
    """
    if "pre_logits/kernel" in weights:
        raise ValueError(
            "timm's VisionTransformer has no pre_logits (representation) layer since timm 0.6, so this "
            "model cannot be expressed in its layout. Export to 'hf' (its pooler is pre_logits, without a "
            "head) or 'official', or build the model without representation_size."
        )
    out = {
        "patch_embed.proj.weight": _hwio_to_torch_conv(weights["patch_embedding/projection/kernel"]),
        "patch_embed.proj.bias": weights["patch_embedding/projection/bias"],
        "cls_token": weights["class_token/token"],
        "pos_embed": weights["position_embedding/embedding"],
        "norm.weight": weights["encoder_norm/gamma"],
        "norm.bias": weights["encoder_norm/beta"],
    }
    for i in range(num_blocks(weights)):
        b = f"blocks.{i}."
        out[b + "norm1.weight"] = weights[_block(i, "norm1/gamma")]
        out[b + "norm1.bias"] = weights[_block(i, "norm1/beta")]
        out[b + "attn.qkv.weight"] = _t(weights[_block(i, "attention/qkv/kernel")])
        out[b + "attn.qkv.bias"] = weights[_block(i, "attention/qkv/bias")]
        out[b + "attn.proj.weight"] = _t(weights[_block(i, "attention/output/kernel")])
        out[b + "attn.proj.bias"] = weights[_block(i, "attention/output/bias")]
        out[b + "norm2.weight"] = weights[_block(i, "norm2/gamma")]
        out[b + "norm2.bias"] = weights[_block(i, "norm2/beta")]
        for dense in ("fc1", "fc2"):
            out[b + f"mlp.{dense}.weight"] = _t(weights[_block(i, f"mlp/{dense}/kernel")])
            out[b + f"mlp.{dense}.bias"] = weights[_block(i, f"mlp/{dense}/bias")]
    if "head/kernel" in weights:
        out["head.weight"] = _t(weights["head/kernel"])
        out["head.bias"] = weights["head/bias"]
    return out


# --------------------------------------------------------------------------- Hugging Face

_HF_IGNORED = ("embeddings.mask_token",)  # masked-image-modelling only; no role in inference.


def _hf_prefix(tensors):
    return "vit." if "vit.embeddings.cls_token" in tensors else ""


def hf_to_keras(tensors):
    """Converts a `transformers` ViT state dict (ViTModel or ViTForImageClassification)."""
    prefix = _hf_prefix(tensors)
    source = _Source(tensors, "Hugging Face transformers", ignore=tuple(prefix + name for name in _HF_IGNORED))
    p = lambda name: prefix + name  # noqa: E731
    num_layers = _count_blocks(tensors, re.escape(p("encoder.layer.")) + r"(\d+)\.")
    weights = {
        "patch_embedding/projection/kernel": _safe(
            _torch_conv_to_hwio,
            "patch_embeddings.projection.weight",
            source.take(p("embeddings.patch_embeddings.projection.weight")),
        ),
        "patch_embedding/projection/bias": source.take(p("embeddings.patch_embeddings.projection.bias")),
        "class_token/token": source.take(p("embeddings.cls_token")),
        "position_embedding/embedding": source.take(p("embeddings.position_embeddings")),
    }
    for i in range(num_layers):
        b = p(f"encoder.layer.{i}.")
        weights[_block(i, "norm1/gamma")] = source.take(b + "layernorm_before.weight")
        weights[_block(i, "norm1/beta")] = source.take(b + "layernorm_before.bias")
        parts = [source.take(b + f"attention.attention.{n}.weight") for n in ("query", "key", "value")]
        weights[_block(i, "attention/qkv/kernel")] = _safe(
            lambda *w: np.concatenate([x.T for x in w], axis=1), f"layer {i} query/key/value", *parts
        )
        parts = [source.take(b + f"attention.attention.{n}.bias") for n in ("query", "key", "value")]
        weights[_block(i, "attention/qkv/bias")] = _safe(
            lambda *x: np.concatenate(x), f"layer {i} query/key/value bias", *parts
        )
        weights[_block(i, "attention/output/kernel")] = _t(source.take(b + "attention.output.dense.weight"))
        weights[_block(i, "attention/output/bias")] = source.take(b + "attention.output.dense.bias")
        weights[_block(i, "norm2/gamma")] = source.take(b + "layernorm_after.weight")
        weights[_block(i, "norm2/beta")] = source.take(b + "layernorm_after.bias")
        weights[_block(i, "mlp/fc1/kernel")] = _t(source.take(b + "intermediate.dense.weight"))
        weights[_block(i, "mlp/fc1/bias")] = source.take(b + "intermediate.dense.bias")
        weights[_block(i, "mlp/fc2/kernel")] = _t(source.take(b + "output.dense.weight"))
        weights[_block(i, "mlp/fc2/bias")] = source.take(b + "output.dense.bias")
    weights["encoder_norm/gamma"] = source.take(p("layernorm.weight"))
    weights["encoder_norm/beta"] = source.take(p("layernorm.bias"))
    # ViTModel's pooler (Dense + tanh on the class token) is the original pre_logits.
    for ours, theirs in (("pre_logits", p("pooler.dense")), ("head", "classifier")):
        if source.has(f"{theirs}.weight") or source.has(f"{theirs}.bias"):
            weights[f"{ours}/kernel"] = _t(source.take(f"{theirs}.weight"))
            weights[f"{ours}/bias"] = source.take(f"{theirs}.bias")
    return source.finish(
        weights
    ), f"Hugging Face transformers safetensors ({'ViTForImageClassification' if prefix else 'ViTModel'})"


def keras_to_hf(weights):
    """Converts keras_vit weights to `transformers` ViT names.

    With a head: `ViTForImageClassification` names (`vit.*`, `classifier`).
    Without: `ViTModel` names, with the pooler if there is `pre_logits`.

    Raises:
        ValueError: both `pre_logits` and a head: `ViTForImageClassification`
            has no pooler, so the model cannot be expressed.
    """
    has_head = "head/kernel" in weights
    if has_head and "pre_logits/kernel" in weights:
        raise ValueError(
            "transformers' ViTForImageClassification has no pre_logits (pooler) before its classifier, "
            "so a model with both cannot be exported to the 'hf' layout. Export with include_top=False "
            "(ViTModel with pooler) or use the 'official' layout."
        )
    p = "vit." if has_head else ""
    out = {
        p + "embeddings.cls_token": weights["class_token/token"],
        p + "embeddings.position_embeddings": weights["position_embedding/embedding"],
        p + "embeddings.patch_embeddings.projection.weight": _hwio_to_torch_conv(
            weights["patch_embedding/projection/kernel"]
        ),
        p + "embeddings.patch_embeddings.projection.bias": weights["patch_embedding/projection/bias"],
        p + "layernorm.weight": weights["encoder_norm/gamma"],
        p + "layernorm.bias": weights["encoder_norm/beta"],
    }
    for i in range(num_blocks(weights)):
        b = p + f"encoder.layer.{i}."
        out[b + "layernorm_before.weight"] = weights[_block(i, "norm1/gamma")]
        out[b + "layernorm_before.bias"] = weights[_block(i, "norm1/beta")]
        kernels = np.split(weights[_block(i, "attention/qkv/kernel")], 3, axis=1)
        biases = np.split(weights[_block(i, "attention/qkv/bias")], 3)
        for name, kernel, bias in zip(("query", "key", "value"), kernels, biases):
            out[b + f"attention.attention.{name}.weight"] = _t(kernel)
            out[b + f"attention.attention.{name}.bias"] = np.ascontiguousarray(bias)
        out[b + "attention.output.dense.weight"] = _t(weights[_block(i, "attention/output/kernel")])
        out[b + "attention.output.dense.bias"] = weights[_block(i, "attention/output/bias")]
        out[b + "layernorm_after.weight"] = weights[_block(i, "norm2/gamma")]
        out[b + "layernorm_after.bias"] = weights[_block(i, "norm2/beta")]
        out[b + "intermediate.dense.weight"] = _t(weights[_block(i, "mlp/fc1/kernel")])
        out[b + "intermediate.dense.bias"] = weights[_block(i, "mlp/fc1/bias")]
        out[b + "output.dense.weight"] = _t(weights[_block(i, "mlp/fc2/kernel")])
        out[b + "output.dense.bias"] = weights[_block(i, "mlp/fc2/bias")]
    if "pre_logits/kernel" in weights:
        out["pooler.dense.weight"] = _t(weights["pre_logits/kernel"])
        out["pooler.dense.bias"] = weights["pre_logits/bias"]
    if has_head:
        out["classifier.weight"] = _t(weights["head/kernel"])
        out["classifier.bias"] = weights["head/bias"]
    return out


# --------------------------------------------------------------------------- dispatch


def num_blocks(weights):
    return _count_blocks(weights, r"encoder_block_(\d+)/")


def detect_format(tensors):
    """Returns `"official"`, `"timm"` or `"hf"` from a checkpoint's tensor names.

    Raises:
        CheckpointFormatError: none matches (the message shows some names).
    """
    if _official_prefix(tensors) is not None:
        return "official"
    if "patch_embed.proj.weight" in tensors:
        return "timm"
    if _hf_prefix(tensors) + "embeddings.patch_embeddings.projection.weight" in tensors:
        return "hf"
    sample = sorted(tensors)[:8]
    raise CheckpointFormatError(
        "This is not a ViT checkpoint in a layout keras_vit reads (official .npz, timm, Hugging Face "
        f"transformers): none of their patch-embedding tensors is present. First names: {sample}."
    )


_TO_KERAS = {"official": official_to_keras, "timm": timm_to_keras, "hf": hf_to_keras}


def to_keras(tensors, format=None):
    """Converts a checkpoint dict to keras_vit names.

    Args:
        tensors: `{name: np.ndarray}` as read from the file.
        format: `"official"`, `"timm"`, `"hf"` or None to detect it.

    Returns:
        `(weights, layout)`: the converted dict and a description of the layout.
    """
    detected = detect_format(tensors)
    if format is not None and format != detected:
        raise CheckpointFormatError(
            f"Expected a {format} checkpoint but the tensor names are those of the {detected} layout."
        )
    return _TO_KERAS[detected](tensors)


def from_keras(weights, format, num_heads=None):
    """Converts keras_vit weights to `format` (`"official"` needs `num_heads`)."""
    if format == "timm":
        return keras_to_timm(weights)
    if format == "hf":
        return keras_to_hf(weights)
    if format == "official":
        if not num_heads:
            raise ValueError("The official layout splits attention per head: pass num_heads.")
        return keras_to_official(weights, num_heads)
    raise ValueError(f"`format` must be one of {FORMATS}. Received: format={format!r}")


@dataclasses.dataclass
class CheckpointFacts:
    """What a converted checkpoint says about the architecture it came from."""

    hidden_dim: int
    num_layers: int
    patch_size: tuple
    num_positions: int
    classes: object
    representation_size: object

    def describe(self):
        parts = [
            f"hidden {self.hidden_dim}",
            f"{self.num_layers} blocks",
            f"patch {self.patch_size[0]}x{self.patch_size[1]}",
        ]
        parts.append(f"{self.classes}-class head" if self.classes else "no head")
        if self.representation_size:
            parts.append(f"pre_logits {self.representation_size}")
        return ", ".join(parts)


def facts(weights):
    kernel = weights["patch_embedding/projection/kernel"]
    return CheckpointFacts(
        hidden_dim=int(kernel.shape[-1]),
        num_layers=num_blocks(weights),
        patch_size=tuple(int(s) for s in kernel.shape[:2]),
        num_positions=int(weights["position_embedding/embedding"].shape[1]),
        classes=int(weights["head/bias"].shape[0]) if "head/bias" in weights else None,
        representation_size=int(weights["pre_logits/bias"].shape[0]) if "pre_logits/bias" in weights else None,
    )
