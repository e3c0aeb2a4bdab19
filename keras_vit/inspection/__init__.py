"""Looking inside a Vision Transformer: the paper's section 4.5, for any keras_vit model.

Computations return NumPy arrays and need only Keras:

- `attention_maps`: every block's attention weights,
  `(num_layers, batch, num_heads, N + 1, N + 1)`, computed without touching
  the model's fused forward pass;
- `attention_rollout` (Abnar & Zuidema, 2020) and its NumPy core `rollout` /
  `class_token_rollout`;
- `mean_attention_distance` (Figure 7 right, Figure 11) and its NumPy core
  `attention_distance`;
- `position_embedding_similarity` (Figure 7 centre, Figure 10);
- `embedding_filters`: principal components of the patch-embedding filters
  (Figure 7 left);
- `intermediate_features`: the token outputs of chosen blocks.

Plots need matplotlib (`pip install "keras-vit[inspect]"`); each writes a PNG
and returns the figure. `write_report` writes them all for one image, as
`keras-vit inspect IMAGE --model ... --out DIR` does.

Example:

```python
import keras_vit
from keras_vit import inspection

model = keras_vit.ViTB16(weights=...)
# pixels: (batch, 224, 224, 3) in [0, 255], as for prediction (the model scales them)
attention = inspection.attention_maps(model, pixels)    # (12, batch, 12, 197, 197)
maps = inspection.attention_rollout(model, pixels)      # (batch, 14, 14)
inspection.plot_attention_rollout(pixels, maps, "rollout.png")
```
"""

from keras_vit.inspection.analysis import (
    HEAD_FUSIONS,
    FilterComponents,
    attention_distance,
    attention_maps,
    attention_rollout,
    class_token_rollout,
    embedding_filters,
    intermediate_features,
    max_embedding_components,
    mean_attention_distance,
    patch_distances,
    position_embedding_similarity,
    rollout,
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
from keras_vit.models.preprocessing import load_image

__all__ = [
    "HEAD_FUSIONS",
    "REPORT_FILES",
    "FilterComponents",
    "attention_distance",
    "attention_maps",
    "attention_rollout",
    "class_token_rollout",
    "displayable_image",
    "embedding_filters",
    "intermediate_features",
    "load_image",
    "max_embedding_components",
    "mean_attention_distance",
    "patch_distances",
    "plot_attention_rollout",
    "plot_class_token_attention",
    "plot_embedding_filters",
    "plot_mean_attention_distance",
    "plot_position_embedding_similarity",
    "position_embedding_similarity",
    "rollout",
    "sample_image_path",
    "write_report",
]
