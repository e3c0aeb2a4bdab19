"""Training: the paper's recipes, tf.data pipelines, distribution and the fine-tune job.

- `recipes`: schedules, optimizers, losses and fault-tolerant checkpoints
  (re-exported here: `keras_vit.training.finetune_optimizer`, ...);
- `layer_decay`: layer-wise learning-rate decay optimizers;
- `data`: image folders, TFDS and arrays as tf.data pipelines;
- `distribute`, `multihost`: strategies, precision and several processes;
- `finetune`: the `keras-vit finetune` job;
- `xla_memory`: XLA's CPU compiler scheduled for memory
  (`schedule_xla_cpu_for_memory`, before building a model).

Importing this package imports the recipes only (Keras, no TensorFlow); the
other modules are imported when used.
"""

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
