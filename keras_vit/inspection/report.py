"""The full set of inspection figures for one image (what `keras-vit inspect` writes)."""

import importlib.resources
import os

import keras
import numpy as np

from keras_vit.inspection import analysis, plots
from keras_vit.models import metadata
from keras_vit.models.preprocessing import load_image
from keras_vit.utils import validation

SAMPLE_IMAGE = "sample_image.jpg"

# The files `write_report` produces, in the order it writes them.
REPORT_FILES = (
    "attention_rollout.png",
    "class_token_attention.png",
    "mean_attention_distance.png",
    "position_embedding_similarity.png",
    "embedding_filters.png",
)


def sample_image_path():
    """The path of the photograph bundled with keras_vit for trying things out.

    A 224 x 224 crop of `flower.jpg` from scikit-learn's sample images
    (CC BY 2.0, by vultilion on Flickr; see `keras_vit/resources/README.md`).
    """
    return str(importlib.resources.files("keras_vit") / "resources" / SAMPLE_IMAGE)


def named_model(model, weights=None, image_size=None):
    """The model `keras-vit inspect --model ... --weights ...` names.

    Args:
        model: a constructor name from `keras_vit.models.applications.CONSTRUCTORS` (`"ViTB16"`),
            a variant from `keras_vit.models.variants.VARIANTS` (`"B/16"`), or the path of a
            model saved with `model.save("....keras")`.
        weights: for a constructor, its `weights=` argument (`None`: random
            weights). Not allowed with a saved model, which has its own.
        image_size: optional int, a constructor's square input size.
            Not allowed with a saved model.

    Returns:
        A `keras.Model`.
    """
    import keras_vit

    if model.endswith(".keras") or os.path.isfile(model):
        if weights is not None or image_size is not None:
            raise ValueError(
                f"--weights and --image-size apply to constructor names; the saved model {model!r} "
                f"has its own weights and input size. Received: weights={weights!r}, "
                f"image_size={image_size!r}"
            )
        return metadata.load_classifier(model)
    try:
        constructor = keras_vit.models.applications.constructor_for(model)
    except ValueError as error:
        raise ValueError(f"{error} A saved model is named by its .keras path.") from None
    kwargs = {} if image_size is None else {"input_shape": (image_size, image_size, 3)}
    return constructor(weights=weights, **kwargs)


def write_report(
    model,
    image,
    out_dir,
    preprocess=None,
    head_fusion="mean",
    discard_ratio=0.0,
    num_components=28,
    dpi=100,
):
    """Writes the paper's "inspecting the Vision Transformer" figures for one image.

    Args:
        model: a keras_vit model, or a model with one nested in it (the
            figures are of the ViT; a model with saved class names also gets
            its top class in the rollout's title).
        image: a path to an image file, or a uint8-range array
            `(height, width, 3)`; it is resized to the model's input size.
        out_dir: the folder to write the PNGs to (created if missing).
        preprocess: function from `[0, 255]` pixels to model inputs.
            Defaults to `keras_vit.models.preprocessing.preprocess_input` (a
            pass-through: keras_vit models scale pixels themselves).
        head_fusion: head fusion of the rollout: `"mean"`, `"max"` or
            `"min"`. Defaults to `"mean"`.
        discard_ratio: float in `[0, 1)`, see `rollout`. Defaults to `0.0`.
        num_components: int, the embedding filters' principal components to
            draw; capped at what the model has. Defaults to `28`.
        dpi: the PNGs' resolution. Defaults to `100`.

    Returns:
        A dict from each name in `REPORT_FILES` (without `.png`) to the path
        written.
    """
    # Arguments are checked before any work, so a typo costs no partial report.
    if head_fusion not in analysis.HEAD_FUSIONS:
        raise ValueError(f"`head_fusion` must be one of {analysis.HEAD_FUSIONS}. Received: head_fusion={head_fusion!r}")
    validation.rate("discard_ratio", discard_ratio)
    validation.positive_int("num_components", num_components)
    if isinstance(dpi, bool) or not isinstance(dpi, (int, float)) or dpi <= 0:
        raise ValueError(f"`dpi` must be a positive number. Received: dpi={dpi!r}")
    if preprocess is None:
        from keras_vit.models.preprocessing import preprocess_input as preprocess
    classifier, model = model, analysis.vision_transformer(model)
    height, width, _ = analysis.image_shape(model)
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
    if model.channels_first:
        inputs = np.transpose(inputs, (0, 3, 1, 2))  # the model's own layout
    attention = analysis.attention_maps(model, inputs)
    grid = model.embedding_grid
    prefix = analysis.NUM_PREFIX_TOKENS
    title = f"Attention rollout (head fusion: {head_fusion}, discard ratio: {discard_ratio:g})"
    if metadata.class_names(classifier) is not None:
        outputs = keras.ops.convert_to_numpy(classifier(inputs, training=False))
        name, probability = metadata.top_classes(classifier, outputs, top=1)[0][0]
        title = f"{title}\npredicted: {name} ({probability:.2f})"
    rollout_map = analysis.class_token_rollout(attention, grid, head_fusion, discard_ratio, prefix)
    distances = analysis.attention_distance(attention, grid, model.pixels_per_token, prefix)
    hybrid = analysis.is_hybrid(model)
    if not hybrid:
        components = analysis.embedding_filters(
            model, num_components=min(num_components, analysis.max_embedding_components(model))
        ).components

    paths = {name[: -len(".png")]: os.path.join(os.fspath(out_dir), name) for name in REPORT_FILES}
    os.makedirs(out_dir, exist_ok=True)
    plots.plot_attention_rollout(
        pixels,
        rollout_map,
        paths["attention_rollout"],
        title=title,
        dpi=dpi,
    )
    plots.plot_class_token_attention(
        pixels, attention[:, 0], grid, paths["class_token_attention"], num_prefix_tokens=prefix, dpi=dpi
    )
    plots.plot_mean_attention_distance(distances, paths["mean_attention_distance"], dpi=dpi)
    plots.plot_position_embedding_similarity(
        analysis.position_embedding_similarity(model), paths["position_embedding_similarity"], dpi=dpi
    )
    if hybrid:
        # The figure still exists (a report has a fixed set of files) and says why it shows no filters.
        plots.plot_note(paths["embedding_filters"], "No embedding filters", analysis.NO_LINEAR_FILTERS, dpi=dpi)
    else:
        plots.plot_embedding_filters(components, paths["embedding_filters"], dpi=dpi)
    return paths
