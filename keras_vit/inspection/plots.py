"""Figures of what a Vision Transformer has learned (paper section 4.5), each written as a PNG of `figsize * dpi`
pixels at `path` and returned. matplotlib (the `inspect` extra) is used without pyplot: no window, no global state."""

import math
import textwrap

import keras
import numpy as np

from keras_vit.inspection import analysis
from keras_vit.utils import extras, files, validation


def new_figure(width, height, needed_for="keras_vit.inspection's plots"):
    """A matplotlib `Figure` of `width x height` inches, or a one-line error naming the `inspect` extra."""
    extras.require("matplotlib", needed_for, extra="inspect")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _tiles(count, columns, inches, margin):
    """A figure of `count` tiles of `inches` square, `columns` a row, without ticks; the cells after them blank."""
    columns = min(columns, count)
    rows = math.ceil(count / columns)
    figure = new_figure(inches * columns + margin[0], inches * rows + margin[1])
    axes = figure.subplots(rows, columns, squeeze=False, subplot_kw=dict(xticks=[], yticks=[])).ravel()
    for axis in axes[count:]:
        axis.set_axis_off()
    return figure, axes


def save_png(figure, path, dpi):
    """Writes `figure` as a PNG at `path`, atomically; returns it."""
    validation.finite_float("dpi", dpi, minimum=0, include_minimum=False)
    with files.atomic_file(path) as staged:
        figure.savefig(staged, format="png", dpi=dpi)
    return figure


def displayable_image(image):
    """An image `(height, width[, 1 or 3])` as floats in `[0, 1]`: from `[0, 1]`, `[0, 255]`, `[-1, 1]` or min-max."""
    image = np.asarray(image, dtype="float64")
    if image.ndim == 3 and image.shape[-1] == 1:
        image = image[..., 0]
    if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[-1] != 3):
        raise ValueError(
            "Expected an image of shape (height, width, 3), (height, width, 1) or "
            f"(height, width). Received: shape {image.shape}"
        )
    low, high = float(image.min()), float(image.max())
    if low >= 0 and 1 < high <= 255:
        image = image / 255.0
    elif -1 <= low < 0 and high <= 1:
        image = (image + 1.0) / 2.0
    elif low < 0 or high > 1:
        image = _unit_range(image)
    return np.clip(image, 0.0, 1.0)


def _unit_range(values):
    low, high = float(np.min(values)), float(np.max(values))
    return (values - low) / (high - low) if high > low else np.zeros_like(values)


def _overlay(axis, image, values, alpha):
    """Draws `image` and over it the grid map `values`, upsampled (bilinear) and scaled to [0, 1]; returns the map."""
    grid = np.asarray(values, "float32")[..., None]
    upsampled = keras.ops.image.resize(grid, image.shape[:2], data_format="channels_last")  # any global format
    mask = _unit_range(np.asarray(keras.ops.convert_to_numpy(upsampled), dtype="float64")[..., 0])
    axis.imshow(image, cmap="gray")
    return mask, axis.imshow(mask, cmap="jet", alpha=alpha, vmin=0.0, vmax=1.0)


def plot_attention_rollout(images, maps, path, title="Attention rollout", alpha=0.5, dpi=100):
    """Draws a row per image: the input, the rollout map over it, the input weighted by it (paper Figure 6).

    Args:
        images: array `(batch, height, width, 3)` or one image, in any range `displayable_image` takes.
        maps: array `(batch, grid_h, grid_w)` or one map, as `attention_rollout` returns.
        path: where to write the PNG.
        title: the figure's title.
        alpha: float, opacity of the heat map. Defaults to `0.5`.
        dpi: the PNG's resolution. Defaults to `100`.

    Returns:
        The `matplotlib.figure.Figure`.
    """
    validation.finite_float("alpha", alpha, minimum=0, maximum=1)
    images, maps = np.asarray(images), np.asarray(maps)
    images = images[None] if images.ndim == 3 else images
    maps = maps[None] if maps.ndim == 2 else maps
    if len(images) != len(maps):
        raise ValueError(f"Expected one map per image. Received: {len(images)} images and {len(maps)} maps")
    figure, axes = _tiles(3 * len(images), 3, 3.0, (0.0, 0.4))
    axes = axes.reshape(-1, 3)
    heat = None
    for row, (image, values) in enumerate(zip(images, maps)):
        image = displayable_image(image)
        axes[row, 0].imshow(image, cmap="gray")
        mask, heat = _overlay(axes[row, 1], image, values, alpha)
        axes[row, 2].imshow(image * (mask[..., None] if image.ndim == 3 else mask), cmap="gray")
    for column, label in enumerate(("Input", "Rollout heat map", "Input x rollout")):
        axes[0, column].set_title(label)
    figure.colorbar(heat, ax=axes[:, 1], location="bottom", shrink=0.8, label="attention (scaled to max)")
    figure.suptitle(title)
    return save_png(figure, path, dpi)


def plot_class_token_attention(image, attention, grid_size, path, layer=-1, num_prefix_tokens=1, alpha=0.5, dpi=100):
    """Draws the class token's attention of every head of one layer over an image (2.2-inch panels, 5 a row).

    Args:
        image: array `(height, width, 3)`.
        attention: one image's attention `(num_layers, num_heads, T, T)`, e.g. `attention_maps(...)[:, 0]`.
        grid_size: `(grid_h, grid_w)` or an int, the patch grid.
        path: where to write the PNG.
        layer: int, the block to draw. Defaults to `-1`, the last.
        num_prefix_tokens, alpha, dpi: as in `rollout_map` and `plot_attention_rollout`.

    Returns:
        The `matplotlib.figure.Figure`.
    """
    validation.finite_float("alpha", alpha, minimum=0, maximum=1)
    attention = np.asarray(attention, dtype="float64")
    if attention.ndim != 4:
        raise ValueError(
            "`attention` must be one image's weights (num_layers, num_heads, T, T), e.g. "
            f"`attention_maps(model, images)[:, 0]`. Received: shape {attention.shape}"
        )
    num_layers, num_heads = attention.shape[:2]
    if not validation.is_int(layer) or not -num_layers <= layer < num_layers:
        raise ValueError(f"`layer` must be in [-{num_layers}, {num_layers - 1}]. Received: layer={layer!r}")
    grid_h, grid_w = analysis.check_grid(attention, grid_size, num_prefix_tokens)
    image = displayable_image(image)
    figure, axes = _tiles(num_heads + 1, 5, 2.2, (0.0, 0.4))
    axes[0].imshow(image, cmap="gray")
    axes[0].set_title("Input")
    for head in range(num_heads):
        values = attention[layer, head, 0, num_prefix_tokens:].reshape(grid_h, grid_w)
        _overlay(axes[head + 1], image, values, alpha)
        axes[head + 1].set_title(f"Head {head + 1}")
    figure.suptitle(f"Class-token attention, layer {layer % num_layers + 1} of {num_layers}")
    return save_png(figure, path, dpi)


def plot_mean_attention_distance(distances, path, image_size=None, title="Mean attention distance", dpi=100):
    """Draws each head's mean attention distance `(num_layers, num_heads)` against depth (Figure 7 right), 6 x 4.5 in.

    An `image_size` (int or pair) makes the y axis reach the image diagonal, the largest possible distance.
    """
    distances = np.asarray(distances, dtype="float64")
    num_layers, num_heads = distances.shape
    figure = new_figure(6.0, 4.5)
    axes = figure.subplots()
    import matplotlib

    colours = matplotlib.colormaps["tab20" if num_heads > 10 else "tab10"]
    depth = np.arange(1, num_layers + 1)
    for head in range(num_heads):
        axes.scatter(depth, distances[:, head], s=18, color=colours(head % colours.N), label=f"Head {head + 1}")
    top = float(np.max(distances)) * 1.1 if np.max(distances) > 0 else 1.0
    if image_size is not None:
        height, width = validation.pair("image_size", image_size)
        top = math.hypot(height, width)
    ticks = depth if num_layers <= 16 else depth[:: math.ceil(num_layers / 16)]
    axes.set(xlabel="Network depth (layer)", ylabel="Mean attention distance (pixels)", xticks=ticks, ylim=(0, top))
    axes.grid(alpha=0.3)
    if num_heads <= 16:
        axes.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small", frameon=False)
    axes.set_title(title)
    return save_png(figure, path, dpi)


def plot_position_embedding_similarity(similarity, path, title="Position embedding similarity", dpi=100):
    """Draws `similarity` `(grid_h, grid_w, grid_h, grid_w)` as tiles: tile `(i, j)` is patch `(i, j)`'s (Figure 7)."""
    similarity = np.asarray(similarity, dtype="float64")
    if similarity.ndim != 4 or similarity.shape[:2] != similarity.shape[2:]:
        raise ValueError(
            f"`similarity` must have shape (grid_h, grid_w, grid_h, grid_w). Received: shape {similarity.shape}"
        )
    grid_h, grid_w = similarity.shape[:2]
    # One mosaic image with a blank cell between tiles: one draw call, not a subplot per tile.
    mosaic = np.full((grid_h * (grid_h + 1) - 1, grid_w * (grid_w + 1) - 1), np.nan)
    for i in range(grid_h):
        for j in range(grid_w):
            top, left = i * (grid_h + 1), j * (grid_w + 1)
            mosaic[top : top + grid_h, left : left + grid_w] = similarity[i, j]
    # Grids above 16 x 16 get a larger figure: every mosaic cell still covers a pixel at 100 dpi.
    scale = max(1.0, max(grid_h, grid_w) / 16)
    figure = new_figure(7.0 * scale, 6.5 * scale)
    axes = figure.subplots()
    # The NaN cells between tiles are not drawn: the white background shows.
    shown = axes.imshow(mosaic, cmap="viridis", vmin=-1.0, vmax=1.0, interpolation="nearest")
    # One tick per tile at its centre, at most 14 labelled per axis.
    for set_ticks, count in ((axes.set_xticks, grid_w), (axes.set_yticks, grid_h)):
        indices = np.arange(0, count, math.ceil(count / 14))
        set_ticks(indices * (count + 1) + (count - 1) / 2, labels=[str(index + 1) for index in indices])
    axes.set(xlabel="Input patch column", ylabel="Input patch row", title=title)
    axes.tick_params(length=0)
    axes.spines[:].set_visible(False)
    figure.colorbar(shown, ax=axes, shrink=0.8, label="Cosine similarity")
    return save_png(figure, path, dpi)


def plot_embedding_filters(components, path, columns=7, title=None, dpi=100):
    """Draws filter `components` `(n, patch_h, patch_w, channels)` as min-max scaled 1-inch tiles (Figure 7 left).

    `columns` tiles a row (the paper's 7); RGB for 3 channels, else grey.
    """
    components = np.asarray(components, dtype="float64")
    count = len(components)
    figure, axes = _tiles(count, columns, 1.0, (0.2, 0.5))
    for index, component in enumerate(components):
        tile = _unit_range(component if component.shape[-1] == 3 else component.mean(axis=-1))
        axes[index].imshow(tile, cmap="gray", interpolation="nearest")
    if title is None:
        kind = "RGB" if components.shape[-1] == 3 else "Grey"
        title = f"{kind} embedding filters (first {count} principal components)"
    figure.suptitle(title)
    return save_png(figure, path, dpi)


def plot_note(path, title, note, dpi=100):
    """Writes a figure that only says `note`, where a plot does not apply (e.g. a hybrid's filters)."""
    figure = new_figure(6.0, 2.5)
    axes = figure.subplots()
    axes.set_axis_off()
    axes.text(0.5, 0.5, textwrap.fill(note, 60), ha="center", va="center", wrap=True)
    figure.suptitle(title)
    return save_png(figure, path, dpi)
