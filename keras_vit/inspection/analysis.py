"""What a Vision Transformer has learned, as NumPy arrays (paper section 4.5).

The functions that take a model re-run the model's own layers eagerly, with
`return_attention_scores=True` on each `TransformerBlock`, so the model itself
is never modified: its normal forward pass keeps the fused
`keras.ops.dot_product_attention` path. The functions that take arrays
(`rollout`, `class_token_rollout`, `attention_distance`) are plain NumPy, so
they can be checked by hand and reused on attention from anywhere.
"""

import collections
import contextlib

import keras
import numpy as np

from keras_vit import layers as vit_layers
from keras_vit.layers import resnet
from keras_vit.models import architecture
from keras_vit.models.architecture import EMBEDDINGS
from keras_vit.utils import patches, validation

HEAD_FUSIONS = ("mean", "max", "min")

NO_LINEAR_FILTERS = (
    "A hybrid ViT has no linear patch filters: its tokens are projections of a ResNet feature map, not of "
    "pixels, so the paper's RGB embedding filters (Figure 7, left) do not exist for it."
)


def is_hybrid_embedding(layer):
    """Whether `layer` is a hybrid's patch embedding (ResNet + projection)."""
    return isinstance(layer, resnet.HybridPatchEmbedding)


def _linear_patch_kernel(model):
    embedding = vit_parts(model).patch_embedding
    if is_hybrid_embedding(embedding):
        raise ValueError(NO_LINEAR_FILTERS)
    return embedding.projection.kernel


# The layers up to the last block that the inspection pass knows how to
# re-run (dropout and patch dropout are the identity at inference).
_KNOWN_LAYERS = (
    keras.layers.InputLayer,
    keras.layers.Rescaling,
    keras.layers.Permute,  # a channels-first model's images, to channels-last
    keras.layers.Reshape,  # the patch tokens of models saved before `PatchTokens`
    vit_layers.PatchTokens,
    vit_layers.PatchEmbedding,
    resnet.HybridPatchEmbedding,
    vit_layers.ClassToken,
    vit_layers.PositionEmbedding,
    keras.layers.Dropout,
    vit_layers.PatchDropout,
    vit_layers.TransformerBlock,
)

FilterComponents = collections.namedtuple("FilterComponents", ["components", "explained_variance_ratio"])
FilterComponents.__doc__ = """The principal components of the patch-embedding filters.

Attributes:
    components: array `(num_components, patch_h, patch_w, channels)`; the
        components, flattened, are orthonormal.
    explained_variance_ratio: array `(num_components,)`, the share of the
        filters' variance each component explains.
"""


def vit_parts(model):
    """The `keras_vit.models.architecture.ViTLayers` of a keras_vit model, checked for the inspection pass.

    Raises:
        TypeError: `model` is not a `keras.Model`.
        ValueError: `model`'s own layers are not a ViT's (a ViT nested in
            another model must be passed itself), or a layer before the last
            block is one the pass cannot re-run.
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            "Expected a keras_vit model (a `keras.Model` built by e.g. `keras_vit.ViTB16` or "
            f"loaded with `keras.saving.load_model`). Received: model of type {type(model).__name__}"
        )
    counts = {
        kind: sum(isinstance(layer, kind) for layer in model.layers)
        for kind in (EMBEDDINGS, vit_layers.ClassToken, vit_layers.PositionEmbedding, vit_layers.TransformerBlock)
    }
    embeddings, class_tokens, positions, blocks = counts.values()
    if embeddings != 1 or positions != 1 or class_tokens > 1 or not blocks:
        raise ValueError(
            "Expected a keras_vit Vision Transformer with one PatchEmbedding, at most one "
            "ClassToken, one PositionEmbedding and at least one TransformerBlock among "
            f"`model.layers`. Received: model {model.name!r} with {embeddings} "
            f"PatchEmbedding, {class_tokens} ClassToken, {positions} "
            f"PositionEmbedding and {blocks} TransformerBlock layers. A ViT nested inside "
            "another model must be passed itself (e.g. `outer.get_layer('vit_b16')`)."
        )
    parts = architecture.vit_layers(model)
    _check_known_layers(model, parts.blocks[-1])
    return parts


def _check_known_layers(model, last_block):
    """Refuses models with layers the inspection pass would silently skip
    (e.g. a preprocessing layer before the patch embedding)."""
    for layer in model.layers[: model.layers.index(last_block)]:
        if not isinstance(layer, _KNOWN_LAYERS):
            raise ValueError(
                "The inspection pass re-runs the embedding and the transformer blocks of a "
                f"keras_vit model, but found layer {layer.name!r} ({type(layer).__name__}) "
                "before the last block, which it cannot re-run. Pass the Vision Transformer "
                "itself and apply other layers (such as preprocessing) to the images first."
            )


def is_hybrid(model):
    """Whether `model` is a hybrid ViT (ResNet features): it has no linear patch filters."""
    return isinstance(vit_parts(model).patch_embedding, resnet.HybridPatchEmbedding)


def image_shape(parts):
    """The `(height, width, channels)` an image is resized to for the model: its input size, or for a model
    that takes any size, the size its position embedding was built for."""
    arch = architecture.Architecture.from_model(parts.model)
    size = arch.grid_image_size if None in arch.image_size else arch.image_size
    return (*size, arch.channels)


def _input_shape(parts):
    """The images the model takes, batch left out, in its own data format (None: any size)."""
    arch = architecture.Architecture.from_model(parts.model)
    return arch.input_shape("channels_first" if parts.channels_first else "channels_last")


def _prepare_images(parts, images):
    images = np.asarray(keras.ops.convert_to_numpy(images), dtype="float32")
    expected = _input_shape(parts)
    fits = images.ndim == 4 and all(want in (None, got) for want, got in zip(expected, images.shape[1:]))
    if not fits:
        hint = " For one image, pass `image[None]`." if images.ndim == 3 else ""
        shape = ", ".join("any" if side is None else str(side) for side in expected)
        raise ValueError(
            f"Expected a batch of images of shape (batch, {shape}), the model's input, as for prediction "
            f"(raw [0, 255] pixels for the default models). Resize the images or build the model at their "
            f"size.{hint} Received: images with shape {images.shape}"
        )
    if images.shape[0] == 0:
        raise ValueError(f"Expected at least one image. Received: an empty batch of shape {images.shape}")
    return images


def _require_batch_size(batch_size):
    return validation.positive_int("batch_size", batch_size)


def _no_grad():
    # The pass is inference only; on PyTorch this keeps it from recording an
    # autograd graph for every block.
    if keras.backend.backend() == "torch":
        import torch

        return torch.no_grad()
    return contextlib.nullcontext()


def _run_blocks(parts, images, batch_size, with_attention, keep):
    """Runs the model's own layers eagerly, chunk by chunk.

    Returns `(tokens, weights)`: dicts from each block index in `keep` to its
    float32 NumPy token outputs, and (if `with_attention`) from every block
    index to its attention weights, concatenated over the chunks.
    """
    last = len(parts.blocks) - 1 if with_attention else max(keep)
    tokens_out = {index: [] for index in keep}
    weights_out = {index: [] for index in range(last + 1)} if with_attention else {}
    flatten_grid = vit_layers.PatchTokens()
    with _no_grad():
        for start in range(0, images.shape[0], batch_size):
            pixels = images[start : start + batch_size]
            for layer in _pixel_layers(parts):
                pixels = layer(pixels)
            # The patch grid (batch, rows, cols, hidden), plain or hybrid: it also tells the position
            # embedding which grid to resample to.
            patch_grid = parts.patch_embedding(pixels)
            tokens = flatten_grid(patch_grid)
            if parts.class_token is not None:
                tokens = parts.class_token(tokens)
            tokens = parts.position_embedding(tokens, patch_grid=patch_grid)
            for index, block in enumerate(parts.blocks[: last + 1]):
                if with_attention:
                    tokens, weights = block(tokens, training=False, return_attention_scores=True)
                    weights_out[index].append(_to_numpy(weights))
                else:
                    tokens = block(tokens, training=False)
                if index in tokens_out:
                    tokens_out[index].append(_to_numpy(tokens))
    return _concatenate_chunks(tokens_out), _concatenate_chunks(weights_out)


def _token_grid(parts, images):
    """The patch grid of `images` (a model that takes any size resamples its position embedding to it)."""
    shape = tuple(keras.ops.shape(images))
    return patches.patch_grid(
        shape[2:4] if parts.channels_first else shape[1:3], parts.patch_embedding.pixels_per_token
    )


def _pixel_layers(parts):
    """The model's layers before the patch embedding that act on the pixels (scaling, the channels-first
    permute), in the model's order."""
    layers = parts.model.layers
    before = layers[: layers.index(parts.patch_embedding)]
    return [layer for layer in before if isinstance(layer, (keras.layers.Rescaling, keras.layers.Permute))]


def _concatenate_chunks(chunks):
    return {index: np.concatenate(arrays, axis=0) for index, arrays in chunks.items()}


def _to_numpy(tensor):
    return np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(tensor, "float32")))


def attention_maps(model, images, batch_size=16):
    """The attention weights of every block and head of a keras_vit model.

    The model's embedding layers and blocks are re-run eagerly with
    `return_attention_scores=True`; the model is not changed, so its normal
    forward pass keeps the fused attention path. Works for models from the
    constructors and for models reloaded with `keras.saving.load_model`.

    Args:
        model: a keras_vit model (any head, any pooling).
        images: array `(batch, height, width, channels)` of the size the
            model was built for, preprocessed as for prediction.
        batch_size: int, images per eager pass. Defaults to `16`.

    Returns:
        float32 NumPy array `(num_layers, batch, num_heads, N + 1, N + 1)`
        where `N` is the number of patches and token 0 is the class token;
        each row (a query) sums to 1 over the keys.

    Example:

    >>> import keras_vit
    >>> model = keras_vit.VisionTransformer(
    ...     patch_size=8, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32,
    ...     input_shape=(32, 24, 3), classes=10)
    >>> attention_maps(model, np.zeros((1, 32, 24, 3))).shape
    (2, 1, 2, 13, 13)
    """
    parts = vit_parts(model)
    images = _prepare_images(parts, images)
    batch_size = _require_batch_size(batch_size)
    _, weights = _run_blocks(parts, images, batch_size, with_attention=True, keep=())
    return np.stack([weights[index] for index in range(len(parts.blocks))])


def intermediate_features(model, images, layers=None, reshape=False, batch_size=16):
    """The token outputs of chosen transformer blocks.

    Args:
        model: a keras_vit model.
        images: array `(batch, height, width, channels)` of the size the
            model was built for, preprocessed as for prediction.
        layers: an int or a sequence of ints, block indices (negative ones
            count from the end), or `None` for every block.
        reshape: bool. If `True`, drop the class token and return the patch
            tokens as maps `(batch, height // patch, width // patch, D)`, as
            dense-prediction heads want them. Defaults to `False`.
        batch_size: int, images per eager pass. Defaults to `16`.

    Returns:
        For an int `layers`, one float32 array `(batch, N + 1, D)` (or the
        reshaped map); otherwise a list of them in the order asked for. The
        outputs are before the final `encoder_norm`.

    Example:

    >>> import keras_vit
    >>> model = keras_vit.VisionTransformer(
    ...     patch_size=8, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32,
    ...     input_shape=(32, 24, 3), include_top=False)
    >>> intermediate_features(model, np.zeros((1, 32, 24, 3)), layers=-1, reshape=True).shape
    (1, 4, 3, 16)
    """
    parts = vit_parts(model)
    num_layers = len(parts.blocks)
    single = isinstance(layers, (int, np.integer)) and not isinstance(layers, bool)
    requested = list(range(num_layers)) if layers is None else [layers] if single else list(layers)
    for index in requested:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not -num_layers <= index < num_layers:
            raise ValueError(
                f"`layers` must be block indices in [-{num_layers}, {num_layers - 1}] for this "
                f"{num_layers}-block model, or None for all. Received: layers={layers!r}"
            )
    if not requested:
        raise ValueError(f"`layers` must name at least one block. Received: layers={layers!r}")
    wanted = sorted({int(index) % num_layers for index in requested})
    images = _prepare_images(parts, images)
    batch_size = _require_batch_size(batch_size)
    features, _ = _run_blocks(parts, images, batch_size, with_attention=False, keep=wanted)
    if reshape:
        prefix = parts.position_embedding.num_prefix_tokens
        grid_h, grid_w = parts.position_embedding.grid_size
        features = {
            index: value[:, prefix:].reshape(value.shape[0], grid_h, grid_w, value.shape[-1])
            for index, value in features.items()
        }
    result = [features[int(index) % num_layers] for index in requested]
    return result[0] if single else result


def _check_attention(attention, name="attention"):
    attention = np.asarray(attention, dtype="float64")
    if attention.ndim != 5 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(
            f"`{name}` must have shape (num_layers, batch, num_heads, tokens, tokens), as "
            f"`attention_maps` returns. Received: shape {attention.shape}"
        )
    return attention


def check_grid(attention, grid_size, num_prefix_tokens):
    """Returns `(grid_h, grid_w)` after checking it matches the attention's tokens."""
    grid_h, grid_w = validation.pair("grid_size", grid_size)
    if attention.shape[-1] != num_prefix_tokens + grid_h * grid_w:
        raise ValueError(
            f"A {grid_h}x{grid_w} grid with {num_prefix_tokens} prefix token(s) has "
            f"{num_prefix_tokens + grid_h * grid_w} tokens, but the attention is over "
            f"{attention.shape[-1]}. Received: grid_size={grid_size!r}"
        )
    return grid_h, grid_w


def rollout(attention, head_fusion="mean", discard_ratio=0.0, num_prefix_tokens=1):
    """Attention rollout (Abnar & Zuidema, 2020) of stacked attention weights.

    Per layer the heads are fused, optionally the weakest weights are
    discarded, the identity is added for the residual connection, the rows
    are re-normalised to sum to 1, and the layers are multiplied in order:
    `R = A_L ... A_2 A_1`.

    Args:
        attention: array `(num_layers, batch, num_heads, T, T)` as returned
            by `attention_maps`.
        head_fusion: how heads are fused: `"mean"`, `"max"` or `"min"`.
            Defaults to `"mean"`.
        discard_ratio: float in `[0, 1)`, the fraction of each fused
            `T x T` matrix's lowest weights set to 0 before the identity is
            added. The prefix (class) tokens' attention to themselves is
            never discarded, as in the reference implementation
            (jacobgil/vit-explain). Defaults to `0.0`.
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
    if head_fusion not in HEAD_FUSIONS:
        raise ValueError(f"`head_fusion` must be one of {HEAD_FUSIONS}. Received: head_fusion={head_fusion!r}")
    discard_ratio = validation.rate("discard_ratio", discard_ratio)
    fused = getattr(np, head_fusion)(attention, axis=2)  # (layers, batch, T, T)
    num_layers, batch, tokens, _ = fused.shape
    if discard_ratio > 0:
        fused = _discard_lowest(fused, discard_ratio, min(num_prefix_tokens, tokens))
    identity = np.eye(tokens)
    result = np.broadcast_to(identity, (batch, tokens, tokens)).copy()
    for layer in range(num_layers):
        # Adding the identity models the residual connection: half of each
        # token's next state is itself (Abnar & Zuidema, 2020, section 3).
        step = fused[layer] + identity
        step = step / step.sum(axis=-1, keepdims=True)
        result = step @ result
    return result


def _discard_lowest(fused, discard_ratio, num_prefix_tokens):
    num_layers, batch, tokens, _ = fused.shape
    flat = fused.reshape(num_layers, batch, tokens * tokens).copy()
    protected = np.arange(num_prefix_tokens) * (tokens + 1)  # the prefix tokens' diagonal entries
    count = min(int(tokens * tokens * discard_ratio), tokens * tokens - len(protected))
    ranking = flat.copy()
    ranking[..., protected] = np.inf  # sorted last, so never among the discarded
    lowest = np.argsort(ranking, axis=-1, kind="stable")[..., :count]
    np.put_along_axis(flat, lowest, 0.0, axis=-1)
    return flat.reshape(fused.shape)


def class_token_rollout(attention, grid_size, head_fusion="mean", discard_ratio=0.0, num_prefix_tokens=1):
    """The class token's attention rollout over the patch grid.

    Args:
        attention: array `(num_layers, batch, num_heads, T, T)` as returned
            by `attention_maps`.
        grid_size: `(grid_h, grid_w)`, the patch grid (`grid_h * grid_w`
            must be `T - num_prefix_tokens`); an int means a square grid.
        head_fusion: `"mean"`, `"max"` or `"min"`. Defaults to `"mean"`.
        discard_ratio: float in `[0, 1)`, see `rollout`. Defaults to `0.0`.
        num_prefix_tokens: int, tokens before the patches. Defaults to `1`.

    Returns:
        float64 array `(batch, grid_h, grid_w)`: row 0 of the rollout over
        the patches, not re-scaled (its sum is 1 minus what the class token
        keeps for itself).
    """
    attention = _check_attention(attention)
    grid_h, grid_w = check_grid(attention, grid_size, num_prefix_tokens)
    rolled = rollout(attention, head_fusion, discard_ratio, num_prefix_tokens)
    return rolled[:, 0, num_prefix_tokens:].reshape(-1, grid_h, grid_w)


def attention_rollout(model, images, head_fusion="mean", discard_ratio=0.0, batch_size=16):
    """The class token's attention rollout over the patch grid of each image.

    Attention rollout (Abnar & Zuidema, 2020) follows the attention through
    all layers, adding the identity for the residual connections; the paper
    uses it for its Figure 6 and Figure 14.

    Args:
        model: a keras_vit model.
        images: array `(batch, height, width, channels)` of the size the
            model was built for, preprocessed as for prediction.
        head_fusion: how heads are fused: `"mean"`, `"max"` or `"min"`.
            Defaults to `"mean"`.
        discard_ratio: float in `[0, 1)`, the fraction of the lowest fused
            weights discarded per layer. Defaults to `0.0`.
        batch_size: int, images per eager pass. Defaults to `16`.

    Returns:
        float64 array `(batch, height // patch_h, width // patch_w)`; draw it
        over the images with `keras_vit.inspection.plot_attention_rollout`.

    Example:

    >>> import keras_vit
    >>> model = keras_vit.VisionTransformer(
    ...     patch_size=8, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32,
    ...     input_shape=(32, 24, 3), include_top=False)
    >>> attention_rollout(model, np.zeros((2, 32, 24, 3))).shape
    (2, 4, 3)
    """
    parts = vit_parts(model)
    attention = attention_maps(model, images, batch_size=batch_size)
    return class_token_rollout(
        attention,
        _token_grid(parts, images),
        head_fusion=head_fusion,
        discard_ratio=discard_ratio,
        num_prefix_tokens=parts.position_embedding.num_prefix_tokens,
    )


def patch_distances(grid_size, patch_size):
    """Pixel distances between the centres of every pair of patches.

    Args:
        grid_size: `(grid_h, grid_w)` or an int.
        patch_size: `(patch_h, patch_w)` or an int, in pixels.

    Returns:
        float64 array `(grid_h * grid_w, grid_h * grid_w)`, patches in
        row-major order.

    Example:

    >>> patch_distances((1, 3), 16)
    array([[ 0., 16., 32.],
           [16.,  0., 16.],
           [32., 16.,  0.]])
    """
    grid_h, grid_w = validation.pair("grid_size", grid_size)
    patch_h, patch_w = validation.pair("patch_size", patch_size)
    rows, cols = np.meshgrid(np.arange(grid_h), np.arange(grid_w), indexing="ij")
    y = rows.reshape(-1) * patch_h
    x = cols.reshape(-1) * patch_w
    return np.hypot(y[:, None] - y[None, :], x[:, None] - x[None, :])


def attention_distance(attention, grid_size, patch_size, num_prefix_tokens=1):
    """Mean attention distance in pixels, per layer and head.

    For each query patch, the distance to each key patch weighted by the
    attention between them, averaged over query patches and images: the
    paper's "attention distance" (Figure 7 right, Figure 11). The class
    token has no place in the image, so it is left out as query and key and
    each query's weights over the patches are re-normalised to sum to 1.

    Args:
        attention: array `(num_layers, batch, num_heads, T, T)` as returned
            by `attention_maps`.
        grid_size: `(grid_h, grid_w)` or an int, the patch grid.
        patch_size: `(patch_h, patch_w)` or an int, in pixels.
        num_prefix_tokens: int, tokens before the patches. Defaults to `1`.

    Returns:
        float64 array `(num_layers, num_heads)`, in pixels.

    Example:

    >>> attention = np.zeros((1, 1, 1, 3, 3))
    >>> attention[..., 0, 0] = 1.0
    >>> attention[..., 1, 2] = attention[..., 2, 1] = 1.0  # each patch looks at the other
    >>> attention_distance(attention, grid_size=(1, 2), patch_size=16)
    array([[16.]])
    """
    attention = _check_attention(attention)
    distances = patch_distances(grid_size, patch_size)
    num_patches = distances.shape[0]
    if attention.shape[-1] != num_prefix_tokens + num_patches:
        raise ValueError(
            f"The grid {grid_size!r} with {num_prefix_tokens} prefix token(s) has "
            f"{num_prefix_tokens + num_patches} tokens, but the attention is over "
            f"{attention.shape[-1]}. Received: attention with shape {attention.shape}"
        )
    weights = attention[..., num_prefix_tokens:, num_prefix_tokens:]
    totals = weights.sum(axis=-1, keepdims=True)
    # A query that puts all its weight on the class token integrates nothing
    # from the image: distance 0 rather than a division by zero.
    weights = weights / np.where(totals > 0, totals, 1.0)
    per_query = (weights * distances).sum(axis=-1)  # (layers, batch, heads, queries)
    return per_query.mean(axis=(1, 3))


def mean_attention_distance(model, images, batch_size=16):
    """Mean attention distance in pixels of every head of every block.

    See `attention_distance` for the definition; draw it against depth with
    `keras_vit.inspection.plot_mean_attention_distance` (paper Figure 7 right).

    Args:
        model: a keras_vit model.
        images: array `(batch, height, width, channels)` of the size the
            model was built for, preprocessed as for prediction.
        batch_size: int, images per eager pass. Defaults to `16`.

    Returns:
        float64 array `(num_layers, num_heads)`, in pixels, averaged over
        the images and the query patches.

    Example:

    >>> import keras_vit
    >>> model = keras_vit.VisionTransformer(
    ...     patch_size=8, hidden_dim=16, num_layers=2, num_heads=2, mlp_dim=32,
    ...     input_shape=(32, 24, 3), include_top=False)
    >>> mean_attention_distance(model, np.zeros((1, 32, 24, 3))).shape
    (2, 2)
    """
    parts = vit_parts(model)
    attention = attention_maps(model, images, batch_size=batch_size)
    return attention_distance(
        attention,
        _token_grid(parts, images),
        parts.patch_embedding.pixels_per_token,
        num_prefix_tokens=parts.position_embedding.num_prefix_tokens,
    )


def position_embedding_similarity(model):
    """Cosine similarity of each patch's position embedding with every other.

    The paper's Figure 7 (centre) and Figure 10: a trained ViT learns
    embeddings that are most similar within rows and columns.

    Args:
        model: a keras_vit model.

    Returns:
        float64 array `(grid_h, grid_w, grid_h, grid_w)`: entry
        `[i, j, k, l]` is the similarity of patch `(i, j)` with patch
        `(k, l)`; the class token's embedding is left out.

    Example:

    >>> import keras_vit
    >>> model = keras_vit.VisionTransformer(
    ...     patch_size=8, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32,
    ...     input_shape=(32, 24, 3), include_top=False)
    >>> similarity = position_embedding_similarity(model)
    >>> similarity.shape, round(float(similarity[1, 2, 1, 2]), 6)
    ((4, 3, 4, 3), 1.0)
    """
    layer = vit_parts(model).position_embedding
    grid_h, grid_w = layer.grid_size
    embedding = np.asarray(keras.ops.convert_to_numpy(layer.embedding), dtype="float64")[0]
    embedding = embedding[layer.num_prefix_tokens :]
    norms = np.linalg.norm(embedding, axis=-1, keepdims=True)
    unit = embedding / np.maximum(norms, np.finfo("float64").tiny)
    similarity = unit @ unit.T
    return similarity.reshape(grid_h, grid_w, grid_h, grid_w)


def max_embedding_components(model):
    """The most principal components `embedding_filters` can return for a model."""
    kernel = _linear_patch_kernel(model)
    patch_h, patch_w, channels, hidden_dim = (int(dim) for dim in kernel.shape)
    return min(hidden_dim, patch_h * patch_w * channels)


def embedding_filters(model, num_components=28):
    """The principal components of the patch-embedding filters.

    Each of the `D` filters of the patch embedding (a `patch_h x patch_w x
    channels` kernel) is a point; the principal components of these points
    are the paper's "RGB embedding filters" (Figure 7 left, first 28
    components). The filters are centred before the SVD; each component's
    sign is chosen so that its largest-magnitude entry is positive.

    Args:
        model: a keras_vit model.
        num_components: int, how many components, at most
            `min(D, patch_h * patch_w * channels)`. Defaults to `28`.

    Returns:
        A `FilterComponents(components, explained_variance_ratio)`:
        `components` of shape `(num_components, patch_h, patch_w, channels)`
        (orthonormal when flattened) and the share of variance each explains.

    Example:

    >>> import keras_vit
    >>> model = keras_vit.VisionTransformer(
    ...     patch_size=4, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32,
    ...     input_shape=(16, 16, 3), include_top=False)
    >>> embedding_filters(model, num_components=6).components.shape
    (6, 4, 4, 3)
    """
    kernel = np.asarray(keras.ops.convert_to_numpy(_linear_patch_kernel(model)), dtype="float64")
    patch_h, patch_w, channels, hidden_dim = kernel.shape
    limit = min(hidden_dim, patch_h * patch_w * channels)
    if isinstance(num_components, bool) or not isinstance(num_components, int) or not 1 <= num_components <= limit:
        raise ValueError(
            f"`num_components` must be an integer in [1, {limit}] for this model ({hidden_dim} "
            f"filters of {patch_h}x{patch_w}x{channels}). Received: num_components={num_components!r}"
        )
    filters = kernel.reshape(-1, hidden_dim).T  # one row per filter, HWC order
    centred = filters - filters.mean(axis=0, keepdims=True)
    _, singular_values, components = np.linalg.svd(centred, full_matrices=False)
    components = components[:num_components]
    signs = np.sign(components[np.arange(num_components), np.argmax(np.abs(components), axis=1)])
    components = components * np.where(signs == 0, 1.0, signs)[:, None]
    variance = singular_values**2
    total = variance.sum()
    ratio = variance[:num_components] / total if total > 0 else np.zeros(num_components)
    return FilterComponents(components.reshape(num_components, patch_h, patch_w, channels), ratio)
