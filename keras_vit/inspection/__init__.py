"""Looking inside a Vision Transformer (paper section 4.5): NumPy computations, their plots (the `inspect` extra),
and `write_report`, all figures for one image as `keras-vit inspect` writes them."""

from keras_vit.inspection.analysis import (
    HEAD_FUSIONS,
    FilterComponents,
    attention_distance,
    attention_maps,
    attention_rollout,
    embedding_filters,
    intermediate_features,
    mean_attention_distance,
    patch_distances,
    position_embedding_similarity,
    rollout,
    rollout_map,
)
from keras_vit.inspection.plots import (
    displayable_image,
    plot_attention_rollout,
    plot_class_token_attention,
    plot_embedding_filters,
    plot_mean_attention_distance,
    plot_position_embedding_similarity,
)
from keras_vit.inspection.report import REPORT_FILES, sample_image_path, write_report

__all__ = [
    "HEAD_FUSIONS",
    "REPORT_FILES",
    "FilterComponents",
    "attention_distance",
    "attention_maps",
    "attention_rollout",
    "displayable_image",
    "embedding_filters",
    "intermediate_features",
    "mean_attention_distance",
    "patch_distances",
    "plot_attention_rollout",
    "plot_class_token_attention",
    "plot_embedding_filters",
    "plot_mean_attention_distance",
    "plot_position_embedding_similarity",
    "position_embedding_similarity",
    "rollout",
    "rollout_map",
    "sample_image_path",
    "write_report",
]
