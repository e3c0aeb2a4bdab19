"""Training: the paper's recipes (importable from here), tf.data pipelines, distribution and `keras-vit finetune`."""

from keras_vit.training.recipes import (
    NO_WEIGHT_DECAY_NAMES,
    AtomicModelCheckpoint,
    FaultTolerantBackup,
    ReleaseGradients,
    SparseSmoothedCrossentropy,
    StopAtIteration,
    SyncFreeSGD,
    ThroughputMeter,
    WarmupDecay,
    atomic_save_model,
    classification_loss,
    decays_weight,
    finetune_optimizer,
    pretrain_optimizer,
)
from keras_vit.training.xla_memory import schedule_xla_cpu_for_memory

__all__ = [
    "NO_WEIGHT_DECAY_NAMES",
    "AtomicModelCheckpoint",
    "FaultTolerantBackup",
    "ReleaseGradients",
    "SparseSmoothedCrossentropy",
    "StopAtIteration",
    "SyncFreeSGD",
    "ThroughputMeter",
    "WarmupDecay",
    "atomic_save_model",
    "classification_loss",
    "decays_weight",
    "finetune_optimizer",
    "pretrain_optimizer",
    "schedule_xla_cpu_for_memory",
]
