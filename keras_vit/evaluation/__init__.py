"""What a ViT has learned: the paper's linear few-shot, a linear probe, DINO's k-NN and a held-out report of its
head, in NumPy on the features `extract_features` streams; `evaluate` runs them all (`keras-vit evaluate`)."""

from keras_vit.evaluation.extraction import Features, Representation, check_features, extract_features, representation
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
