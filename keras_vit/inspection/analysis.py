"""What a Vision Transformer has learned, as NumPy arrays (paper section 4.5); `rollout`, `rollout_map` and
`attention_distance` take attention from anywhere."""

import collections
import contextlib

import keras
import numpy as np

from keras_vit.models.vit import block_indices, find_vit
from keras_vit.utils import patches, validation

HEAD_FUSIONS = ("mean", "max", "min")
NO_LINEAR_FILTERS = (
    "A hybrid ViT has no linear patch filters: its tokens are projections of a ResNet feature map, not of "
    "pixels, so the paper's RGB embedding filters (Figure 7, left) do not exist for it."
)
NO_POSITION_EMBEDDING = (
    "This model has no learned position embedding (position_embedding=False; a RoPE model rotates its queries and "
    "keys by the patches' positions instead), so the paper's similarity figure (Figure 7, centre) does not exist."
)

FilterComponents = collections.namedtuple("FilterComponents", ["components", "explained_variance_ratio"])
FilterComponents.__doc__ = "Principal components `(n, patch_h, patch_w, channels)` and their explained variance."


def _forward(vit, images, batch_size, **options):
    """`vit.forward_intermediates(**options)` over chunks of images, as lists of float32 NumPy arrays."""
    images = np.asarray(keras.ops.convert_to_numpy(images), dtype="float32")
    expected = tuple(vit.input_shape[1:])
    fits = images.ndim == 4 and all(want in (None, got) for want, got in zip(expected, images.shape[1:]))
    if not fits or not len(images):
        raise ValueError(
            f"Expected a non-empty batch of images of shape (batch, {', '.join(map(str, expected))}), as for "
            f"prediction (for one image, pass `image[None]`). Received: images with shape {images.shape}"
        )
    batch_size = validation.positive_int("batch_size", batch_size)
    # Inference only: on PyTorch, no autograd graph for every block.
    no_grad = contextlib.nullcontext()
    if keras.backend.backend() == "torch":
        import torch

        no_grad = torch.no_grad()
    chunks = []
    with no_grad:
        for start in range(0, len(images), batch_size):
            chunk = images[start : start + batch_size]
            result = vit.forward_intermediates(chunk, stop_early=True, intermediates_only=True, **options)
            result = result if options.get("return_attention") else (result,)
            chunks.append(
                [[keras.ops.convert_to_numpy(keras.ops.cast(tensor, "float32")) for tensor in part] for part in result]
            )
    return [[np.concatenate(tensors) for tensors in zip(*part)] for part in zip(*chunks)]


def _token_grid(vit, images):
    """The patch grid of `images` (a model that takes any size resamples its position embedding to it)."""
    shape = tuple(keras.ops.shape(images))
    return patches.patch_grid(shape[2:4] if vit.channels_first else shape[1:3], vit.pixels_per_token)


def attention_maps(model, images, batch_size=16):
    """The attention weights of every block and head of a keras_vit model.

    Args:
        model: a keras_vit model, or a model with one nested in it.
        images: array `(batch, height, width, channels)`, preprocessed as for prediction.
        batch_size: int, images per eager pass. Defaults to `16`.

    Returns:
        float32 array `(num_layers, batch, num_heads, tokens, tokens)`; each row sums to 1.
    """
    _, weights = _forward(find_vit(model), images, batch_size, output_fmt="NLC", return_attention=True)
    return np.stack(weights)


def intermediate_features(model, images, layers=None, reshape=False, batch_size=16):
    """The token outputs of chosen transformer blocks, before the final `encoder_norm`.

    Args:
        model: a keras_vit model.
        images: array `(batch, height, width, channels)`.
        layers: a block index (negative ones count from the end), a sequence of them, or `None` for every block.
        reshape: bool, return the patch tokens as maps `(batch, rows, cols, D)`. Defaults to `False`.
        batch_size: int, images per eager pass. Defaults to `16`.

    Returns:
        For an int `layers`, one float32 array `(batch, tokens, D)` (or map); else a list in the order asked for.
    """
    vit = find_vit(model)
    single = validation.is_int(layers)
    requested = list(range(vit.num_layers)) if layers is None else [layers] if single else list(layers)
    wanted = block_indices(requested, vit.num_layers)
    (outputs,) = _forward(vit, images, batch_size, indices=wanted, output_fmt="NHWC" if reshape else "NLC")
    features = dict(zip(wanted, outputs))
    result = [features[int(index) % vit.num_layers] for index in requested]
    return result[0] if single else result


def _check_attention(attention):
    attention = np.asarray(attention, dtype="float64")
    if attention.ndim != 5 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(
            "`attention` must have shape (num_layers, batch, num_heads, tokens, tokens), as `attention_maps` "
            f"returns. Received: shape {attention.shape}"
        )
    return attention


def check_grid(attention, grid_size, num_prefix_tokens):
    """`grid_size` as `(grid_h, grid_w)`, checked against the attention's tokens."""
    grid_h, grid_w = validation.pair("grid_size", grid_size)
    tokens = num_prefix_tokens + grid_h * grid_w
    if attention.shape[-1] != tokens:
        raise ValueError(
            f"A {grid_h}x{grid_w} grid with {num_prefix_tokens} prefix token(s) has {tokens} tokens, but the "
            f"attention is over {attention.shape[-1]}. Received: grid_size={grid_size!r}"
        )
    return grid_h, grid_w


def rollout(attention, head_fusion="mean", discard_ratio=0.0, num_prefix_tokens=1):
    """Attention rollout (Abnar & Zuidema, 2020) of stacked attention weights (docs/inspection.md).

    Args:
        attention: array `(num_layers, batch, num_heads, T, T)`.
        head_fusion: `"mean"`, `"max"` or `"min"`. Defaults to `"mean"`.
        discard_ratio: float in `[0, 1)`, the share of each fused matrix's lowest weights set to 0.
        num_prefix_tokens: int, tokens before the patches. Defaults to `1`.

    Returns:
        float64 array `(batch, T, T)`; every row sums to 1.

    Example:

    >>> attention = np.full((2, 1, 1, 3, 3), 1 / 3)
    >>> np.round(rollout(attention)[0], 4)
    array([[0.5 , 0.25, 0.25],
           [0.25, 0.5 , 0.25],
           [0.25, 0.25, 0.5 ]])
    """
    attention = _check_attention(attention)
    validation.one_of("head_fusion", head_fusion, HEAD_FUSIONS)
    discard_ratio = validation.rate("discard_ratio", discard_ratio)
    fused = getattr(np, head_fusion)(attention, axis=2)  # (layers, batch, T, T)
    num_layers, batch, tokens, _ = fused.shape
    if discard_ratio > 0:
        flat = fused.reshape(num_layers, batch, tokens * tokens).copy()
        protected = np.arange(min(num_prefix_tokens, tokens)) * (tokens + 1)  # the prefix tokens' diagonal
        count = min(int(tokens * tokens * discard_ratio), tokens * tokens - len(protected))
        ranking = flat.copy()
        ranking[..., protected] = np.inf
        lowest = np.argsort(ranking, axis=-1, kind="stable")[..., :count]
        np.put_along_axis(flat, lowest, 0.0, axis=-1)
        fused = flat.reshape(fused.shape)
    identity = np.eye(tokens)
    result = np.broadcast_to(identity, (batch, tokens, tokens)).copy()
    for layer in range(num_layers):
        step = fused[layer] + identity
        result = (step / step.sum(axis=-1, keepdims=True)) @ result
    return result


def rollout_map(attention, grid_size, head_fusion="mean", discard_ratio=0.0, num_prefix_tokens=1, class_token=True):
    """The `rollout` (same arguments) over the patch grid `grid_size`, `(batch, h, w)`: the class token's row, or
    without a class token (`class_token=False`: SigLIP, average-pooled models) the mean of the patch tokens' rows."""
    rolled = rollout(attention, head_fusion, discard_ratio, num_prefix_tokens)
    grid_h, grid_w = check_grid(rolled, grid_size, num_prefix_tokens)
    rows = rolled[:, :1] if class_token else rolled[:, num_prefix_tokens:]
    return rows[:, :, num_prefix_tokens:].mean(axis=1).reshape(-1, grid_h, grid_w)


def attention_rollout(model, images, head_fusion="mean", discard_ratio=0.0, batch_size=16):
    """The attention rollout over each image's patch grid, `(batch, grid_h, grid_w)` (Figures 6, 14): the class
    token's, or the patch tokens' mean where the model has no class token.

    `head_fusion` and `discard_ratio` are `rollout`'s, `batch_size` that of `attention_maps`.
    """
    vit = find_vit(model)
    attention = attention_maps(model, images, batch_size=batch_size)
    grid = _token_grid(vit, images)
    return rollout_map(attention, grid, head_fusion, discard_ratio, vit.num_prefix_tokens, vit.class_token)


def patch_distances(grid_size, patch_size):
    """Pixel distances between the centres of every pair of patches, `(grid_h * grid_w,) * 2`, row-major."""
    grid_h, grid_w = validation.pair("grid_size", grid_size)
    patch_h, patch_w = validation.pair("patch_size", patch_size)
    rows, cols = np.meshgrid(np.arange(grid_h), np.arange(grid_w), indexing="ij")
    y = rows.reshape(-1) * patch_h
    x = cols.reshape(-1) * patch_w
    return np.hypot(y[:, None] - y[None, :], x[:, None] - x[None, :])


def attention_distance(attention, grid_size, patch_size, num_prefix_tokens=1):
    """Mean attention distance in pixels `(num_layers, num_heads)` (paper Figures 7 right and 11).

    `attention` is `(num_layers, batch, num_heads, T, T)`; `grid_size` and `patch_size` (pixels) are ints or pairs.

    Example:

    >>> attention = np.zeros((1, 1, 1, 3, 3))
    >>> attention[..., 0, 0] = 1.0
    >>> attention[..., 1, 2] = attention[..., 2, 1] = 1.0  # each patch looks at the other
    >>> attention_distance(attention, grid_size=(1, 2), patch_size=16)
    array([[16.]])
    """
    attention = _check_attention(attention)
    grid = check_grid(attention, grid_size, num_prefix_tokens)
    weights = attention[..., num_prefix_tokens:, num_prefix_tokens:]
    totals = weights.sum(axis=-1, keepdims=True)
    # A query with all its weight on the class token integrates nothing from the image: distance 0.
    weights = weights / np.where(totals > 0, totals, 1.0)
    per_query = (weights * patch_distances(grid, patch_size)).sum(axis=-1)  # (layers, batch, heads, queries)
    return per_query.mean(axis=(1, 3))


def mean_attention_distance(model, images, batch_size=16):
    """`attention_distance` of `attention_maps(model, images, batch_size)`: `(num_layers, num_heads)` pixels."""
    vit = find_vit(model)
    attention = attention_maps(vit, images, batch_size=batch_size)
    return attention_distance(attention, _token_grid(vit, images), vit.pixels_per_token, vit.num_prefix_tokens)


def position_embedding_similarity(model):
    """Cosine similarities `[i, j, k, l]` of patch `(i, j)`'s position embedding with `(k, l)`'s (Figures 7, 10)."""
    vit = find_vit(model)
    if not vit.position_embedding:
        raise ValueError(NO_POSITION_EMBEDDING)
    layer = vit.get_layer("position_embedding")
    embedding = np.asarray(keras.ops.convert_to_numpy(layer.embedding), dtype="float64")[0]
    embedding = embedding[layer.num_prefix_tokens :]
    unit = embedding / np.maximum(np.linalg.norm(embedding, axis=-1, keepdims=True), np.finfo("float64").tiny)
    return (unit @ unit.T).reshape(*layer.grid_size, *layer.grid_size)


def embedding_filters(model, num_components=28):
    """The `FilterComponents` of the centred patch-embedding filters (paper Figure 7 left; not for a hybrid).

    `num_components` is at most `min(D, patch_h * patch_w * channels)`.
    """
    vit = find_vit(model)
    if vit.resnet_stages is not None:
        raise ValueError(NO_LINEAR_FILTERS)
    kernel = vit.get_layer("patch_embedding").projection.kernel
    kernel = np.asarray(keras.ops.convert_to_numpy(kernel), dtype="float64")
    patch_h, patch_w, channels, hidden_dim = kernel.shape
    limit = min(hidden_dim, patch_h * patch_w * channels)
    if not validation.is_int(num_components) or not 1 <= num_components <= limit:
        raise ValueError(
            f"`num_components` must be an integer in [1, {limit}] for this model ({hidden_dim} "
            f"filters of {patch_h}x{patch_w}x{channels}). Received: num_components={num_components!r}"
        )
    filters = kernel.reshape(-1, hidden_dim).T  # one row per filter, HWC order
    _, singular_values, components = np.linalg.svd(filters - filters.mean(axis=0), full_matrices=False)
    components = components[:num_components]
    signs = np.sign(components[np.arange(num_components), np.argmax(np.abs(components), axis=1)])
    components = components * np.where(signs == 0, 1.0, signs)[:, None]
    variance = singular_values**2
    ratio = variance[:num_components] / variance.sum() if variance.sum() > 0 else np.zeros(num_components)
    return FilterComponents(components.reshape(num_components, patch_h, patch_w, channels), ratio)
