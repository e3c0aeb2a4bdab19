"""What a Vision Transformer has learned, as NumPy arrays (paper section 4.5).

The functions that take a model run it through `VisionTransformer.forward_intermediates`, which returns each
block's outputs and attention weights without changing the model: its normal forward pass keeps the fused
`keras.ops.dot_product_attention` path. The functions that take arrays (`rollout`, `class_token_rollout`,
`attention_distance`) are plain NumPy, so they can be checked by hand and reused on attention from anywhere.
"""

import collections
import contextlib

import keras
import numpy as np

from keras_vit.models.vit import find_vit
from keras_vit.utils import patches, validation

HEAD_FUSIONS = ("mean", "max", "min")
# The tokens before the patches: a keras_vit ViT has one, its class token.
NUM_PREFIX_TOKENS = 1

NO_LINEAR_FILTERS = (
    "A hybrid ViT has no linear patch filters: its tokens are projections of a ResNet feature map, not of "
    "pixels, so the paper's RGB embedding filters (Figure 7, left) do not exist for it."
)

FilterComponents = collections.namedtuple("FilterComponents", ["components", "explained_variance_ratio"])
FilterComponents.__doc__ = """The principal components of the patch-embedding filters.

Attributes:
    components: array `(num_components, patch_h, patch_w, channels)`; the
        components, flattened, are orthonormal.
    explained_variance_ratio: array `(num_components,)`, the share of the
        filters' variance each component explains.
"""


def vision_transformer(model):
    """The `keras_vit.VisionTransformer` in `model` (itself, or nested in it).

    Raises:
        TypeError: `model` is not a `keras.Model`.
        ValueError: `model` holds no keras_vit ViT.
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            "Expected a keras_vit model (a `keras.Model` built by e.g. `keras_vit.ViTB16` or "
            f"loaded with `keras.saving.load_model`). Received: model of type {type(model).__name__}"
        )
    return find_vit(model)


def is_hybrid(model):
    """Whether `model` is a hybrid ViT (ResNet features): it has no linear patch filters."""
    return vision_transformer(model).resnet_stages is not None


def _linear_patch_kernel(model):
    vit = vision_transformer(model)
    if vit.resnet_stages is not None:
        raise ValueError(NO_LINEAR_FILTERS)
    return vit.get_layer("patch_embedding").projection.kernel


def image_shape(vit):
    """The `(height, width, channels)` an image is resized to for the model: its input size, or for a model
    that takes any size, the size its position embedding was built for."""
    return (*vit.default_image_size, vit.image_shape[2])


def _prepare_images(vit, images):
    images = np.asarray(keras.ops.convert_to_numpy(images), dtype="float32")
    expected = tuple(vit.input_shape[1:])
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


def _no_grad():
    # The pass is inference only; on PyTorch this keeps it from recording an
    # autograd graph for every block.
    if keras.backend.backend() == "torch":
        import torch

        return torch.no_grad()
    return contextlib.nullcontext()


def _forward_in_chunks(vit, images, batch_size, **options):
    """`vit.forward_intermediates(chunk, **options)` over chunks of `batch_size` images, as float32 NumPy
    arrays concatenated over the chunks (a list per output list)."""
    images = _prepare_images(vit, images)
    batch_size = validation.positive_int("batch_size", batch_size)
    chunks = []
    with _no_grad():
        for start in range(0, images.shape[0], batch_size):
            result = vit.forward_intermediates(images[start : start + batch_size], **options)
            chunks.append(result if options.get("return_attention") else (result,))
    return [
        [np.concatenate([_to_numpy(chunk[part][index]) for chunk in chunks]) for index in range(len(chunks[0][part]))]
        for part in range(len(chunks[0]))
    ]


def _token_grid(vit, images):
    """The patch grid of `images` (a model that takes any size resamples its position embedding to it)."""
    shape = tuple(keras.ops.shape(images))
    return patches.patch_grid(shape[2:4] if vit.channels_first else shape[1:3], vit.pixels_per_token)


def _to_numpy(tensor):
    return np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(tensor, "float32")))


def attention_maps(model, images, batch_size=16):
    """The attention weights of every block and head of a keras_vit model.

    From `VisionTransformer.forward_intermediates(return_attention=True)`;
    the model is not changed, so its normal forward pass keeps the fused
    attention path. Works for models from the constructors and for models
    reloaded with `keras.saving.load_model`.

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
    _, weights = _forward_in_chunks(
        vision_transformer(model), images, batch_size, output_fmt="NLC", return_attention=True
    )
    return np.stack(weights)


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
    vit = vision_transformer(model)
    num_layers = vit.num_layers
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
    (outputs,) = _forward_in_chunks(vit, images, batch_size, indices=wanted, output_fmt="NHWC" if reshape else "NLC")
    features = dict(zip(wanted, outputs))
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
    attention = attention_maps(model, images, batch_size=batch_size)
    return class_token_rollout(
        attention,
        _token_grid(vision_transformer(model), images),
        head_fusion=head_fusion,
        discard_ratio=discard_ratio,
        num_prefix_tokens=NUM_PREFIX_TOKENS,
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
    vit = vision_transformer(model)
    attention = attention_maps(model, images, batch_size=batch_size)
    return attention_distance(
        attention, _token_grid(vit, images), vit.pixels_per_token, num_prefix_tokens=NUM_PREFIX_TOKENS
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
    layer = vision_transformer(model).get_layer("position_embedding")
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
