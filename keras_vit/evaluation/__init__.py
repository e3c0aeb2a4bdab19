"""Evaluating what a ViT has learned: linear few-shot, linear probe, k-NN, and a held-out report.

The paper measures pre-trained representations mostly by linear few-shot
evaluation (section 4): a regularised least-squares regression from the
frozen features of a few images per class to {-1, 1} targets, solved in
closed form (`fewshot`, as big_vision's `evaluators/fewshot_lsr.py`). Beside
it: a logistic-regression probe (`linear_probe`), a weighted k-NN
classifier (`knn_accuracy`, as DINO), and for fine-tuned classifiers the
held-out report of their head (`heldout_report`: top-1/top-5, per class,
confusion matrix, calibration).

The maths is NumPy (the same results on every backend); the features come
from any backend's model (`extract_features`), streamed batch by batch from
any `keras_vit.training.data` source. `evaluate` runs everything and writes
`metrics.json` and the plots: it is the `keras-vit evaluate` command.

Example:

```python
model = keras.saving.load_model("outputs/finetune/model.keras")
train, test = keras_vit.training.finetune.digits_sources()
metrics = keras_vit.evaluation.evaluate(model, train, test, out="outputs/evaluate")
print(keras_vit.evaluation.format_table(metrics))
```
"""

from keras_vit.evaluation.extraction import Features, check_features, extract_features
from keras_vit.evaluation.features import Representation, find_backbone, representation
from keras_vit.evaluation.fewshot_lsr import FewShotResult, RidgeSolver, draw_shots, fewshot
from keras_vit.evaluation.heldout import (
    confusion_matrix,
    dataset_report,
    expected_calibration_error,
    heldout_report,
    plot_confusion,
    top_k_accuracy,
)
from keras_vit.evaluation.knn import knn_accuracy, knn_predict
from keras_vit.evaluation.probe import ProbeResult, linear_probe
from keras_vit.evaluation.report import evaluate, evaluate_features, format_table, plot_shots, write_results

__all__ = [
    "FewShotResult",
    "Features",
    "ProbeResult",
    "Representation",
    "RidgeSolver",
    "check_features",
    "confusion_matrix",
    "dataset_report",
    "draw_shots",
    "evaluate",
    "evaluate_features",
    "expected_calibration_error",
    "extract_features",
    "fewshot",
    "find_backbone",
    "format_table",
    "heldout_report",
    "knn_accuracy",
    "knn_predict",
    "linear_probe",
    "plot_confusion",
    "plot_shots",
    "representation",
    "top_k_accuracy",
    "write_results",
]
