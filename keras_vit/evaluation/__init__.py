"""Evaluating what a ViT has learned: linear few-shot, linear probe, k-NN, and a held-out report.

`fewshot` is the paper's linear few-shot evaluation (section 4; big_vision's closed-form ridge), `linear_probe` a
logistic regression, `knn_accuracy` DINO's weighted k-NN, and `heldout_report` describes a classifier's head (top-1/5,
per class, confusion, calibration). The maths is NumPy; `extract_features` streams any `keras_vit.training.data`
source through the model once. `evaluate` runs everything: it is the `keras-vit evaluate` command (docs/evaluation.md).
"""

from keras_vit.evaluation.extraction import (
    Features,
    Representation,
    check_features,
    extract_features,
    representation,
)
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
