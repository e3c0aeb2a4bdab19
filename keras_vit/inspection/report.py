"""The full set of inspection figures for one image (what `keras-vit inspect` writes)."""

import importlib.resources
import os

import keras
import numpy as np

from keras_vit.inspection import analysis, plots
from keras_vit.models import metadata
from keras_vit.models.preprocessing import load_image
from keras_vit.models.vit import find_vit
from keras_vit.utils import validation

NO_CLASS_TOKEN = "This model has no class token; the attention rollout shows the patch tokens' mean instead."
REPORT_FILES = (
    "attention_rollout.png",
    "class_token_attention.png",
    "mean_attention_distance.png",
    "position_embedding_similarity.png",
    "embedding_filters.png",
)


def sample_image_path():
    """The path of the 224 x 224 photograph bundled with keras_vit (`keras_vit/resources/README.md`)."""
    return str(importlib.resources.files("keras_vit") / "resources" / "sample_image.jpg")


def write_report(
    model, image, out_dir, preprocess=None, head_fusion="mean", discard_ratio=0.0, num_components=28, dpi=100
):
    """Writes the paper's "inspecting the Vision Transformer" figures (`REPORT_FILES`) for one image.

    Args:
        model: a keras_vit model, or a model with one nested in it (with class names, the rollout names its top class).
        image: an image file's path, or a `[0, 255]` array `(height, width, 3)` of the model's input size.
        out_dir: the folder to write the PNGs to (created if missing).
        preprocess: function from `[0, 255]` pixels to model inputs. Defaults to `preprocess_input`.
        head_fusion, discard_ratio: of the rollout (see `rollout`).
        num_components: int, the filters' components to draw (at most what the model has). Defaults to `28`.
        dpi: the PNGs' resolution. Defaults to `100`.

    Returns:
        A dict from each name in `REPORT_FILES` (without `.png`) to the path written.
    """
    # Checked before any work: a typo costs no partial report.
    validation.one_of("head_fusion", head_fusion, analysis.HEAD_FUSIONS)
    validation.rate("discard_ratio", discard_ratio)
    validation.positive_int("num_components", num_components)
    validation.finite_float("dpi", dpi, minimum=0, include_minimum=False)
    if preprocess is None:
        from keras_vit.models.preprocessing import preprocess_input as preprocess
    vit = find_vit(model)
    height, width = vit.default_image_size
    if isinstance(image, (str, os.PathLike)):
        pixels = load_image(os.fspath(image), (height, width))
    else:
        pixels = np.asarray(image)
        if pixels.shape[:2] != (height, width):
            raise ValueError(
                f"The image array must already be {height}x{width}, the model's input size (or pass "
                f"a file path to have it resized). Received: shape {pixels.shape}"
            )
    inputs = preprocess(pixels[None].astype("float32"))
    if vit.channels_first:
        inputs = np.transpose(inputs, (0, 3, 1, 2))
    attention = analysis.attention_maps(vit, inputs)
    grid = vit.embedding_grid
    prefix = vit.num_prefix_tokens
    title = f"Attention rollout (head fusion: {head_fusion}, discard ratio: {discard_ratio:g})"
    if metadata.class_names(model) is not None:
        outputs = keras.ops.convert_to_numpy(model(inputs, training=False))
        name, probability = metadata.top_classes(model, outputs, top=1)[0][0]
        title = f"{title}\npredicted: {name} ({probability:.2f})"
    rollout_map = analysis.rollout_map(attention, grid, head_fusion, discard_ratio, prefix, vit.class_token)
    distances = analysis.attention_distance(attention, grid, vit.pixels_per_token, prefix)
    hybrid = vit.resnet_stages is not None
    if not hybrid:
        patch_h, patch_w, channels, hidden_dim = vit.get_layer("patch_embedding").projection.kernel.shape
        count = min(num_components, hidden_dim, patch_h * patch_w * channels)
        components = analysis.embedding_filters(vit, num_components=count).components

    paths = {name[: -len(".png")]: os.path.join(os.fspath(out_dir), name) for name in REPORT_FILES}
    os.makedirs(out_dir, exist_ok=True)
    plots.plot_attention_rollout(pixels, rollout_map, paths["attention_rollout"], title=title, dpi=dpi)
    if vit.class_token:
        plots.plot_class_token_attention(
            pixels, attention[:, 0], grid, paths["class_token_attention"], num_prefix_tokens=prefix, dpi=dpi
        )
    else:
        plots.plot_note(paths["class_token_attention"], "No class token", NO_CLASS_TOKEN, dpi=dpi)
    plots.plot_mean_attention_distance(distances, paths["mean_attention_distance"], dpi=dpi)
    if vit.position_embedding:
        similarity = analysis.position_embedding_similarity(vit)
        plots.plot_position_embedding_similarity(similarity, paths["position_embedding_similarity"], dpi=dpi)
    else:
        title, note = "No position embedding", analysis.NO_POSITION_EMBEDDING
        plots.plot_note(paths["position_embedding_similarity"], title, note, dpi=dpi)
    if hybrid:
        # A report has a fixed set of files: this one says why it shows no filters.
        plots.plot_note(paths["embedding_filters"], "No embedding filters", analysis.NO_LINEAR_FILTERS, dpi=dpi)
    else:
        plots.plot_embedding_filters(components, paths["embedding_filters"], dpi=dpi)
    return paths
