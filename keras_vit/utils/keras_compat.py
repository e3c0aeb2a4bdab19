"""The one place keras_vit touches Keras internals.

Keras has no public hook for two things keras_vit needs, so this module
uses private names of Keras 3.15 and nothing else does:

- the optimizer: `_use_weight_decay(variable)` (does `exclude_from_weight_decay`
  exclude it), `_get_variable_index(variable)` (its position in the built
  optimizer), and the `_apply_weight_decay(variables)` step that Keras runs
  before `update_step` with the global learning rate (layer-wise rates
  need it per variable, so `PerVariableWeightDecay` turns it off);
- `keras.callbacks.BackupAndRestore`: `_save_model()` writes the backup
  into `_weights_path` and `_training_metadata_path` from `_current_epoch`
  and `_last_batch_seen` (`AtomicBackupWrites` hands them to an atomic
  writer).
- `Layer._flatten_layers(include_self=False, recursive=True)`: every layer
  inside a layer (only models have a public `.layers`, one level deep);
  the quantized sublayers of a composite layer go into its config.

tests/test_keras_compat.py has one test per internal; each fails with a
message naming the Keras change. The tested Keras range is pinned in
pyproject.toml (`keras>=3.15.1,<3.16`); a new Keras minor version is
admitted after those tests pass on it.

Example:

>>> import keras
>>> optimizer = keras.optimizers.AdamW(weight_decay=0.1)
>>> optimizer.exclude_from_weight_decay(var_names=["bias"])
>>> kernel, bias = keras.Variable(np.ones(2), name="kernel"), keras.Variable(np.ones(2), name="bias")
>>> optimizer.build([kernel, bias])
>>> uses_weight_decay(optimizer, kernel), uses_weight_decay(optimizer, bias)
(True, False)
>>> variable_index(optimizer, bias)
1
"""

TESTED_KERAS = ">=3.15.1,<3.16"


def uses_weight_decay(optimizer, variable):
    """Whether `optimizer`'s weight decay applies to `variable` (its `exclude_from_weight_decay` rules)."""
    return bool(optimizer.weight_decay) and optimizer._use_weight_decay(variable)


def variable_index(optimizer, variable):
    """The position of `variable` among the variables `optimizer` was built with."""
    return optimizer._get_variable_index(variable)


class PerVariableWeightDecay:
    """Optimizer mixin: Keras's global weight-decay step is skipped; `update_step` applies it per variable.

    Keras applies decoupled weight decay to every variable with the global
    learning rate just before `update_step`; a subclass that scales the
    rate per variable applies `w -= lr * wd * w` itself, in `update_step`.
    """

    def _apply_weight_decay(self, variables):
        return


class AtomicBackupWrites:
    """`keras.callbacks.BackupAndRestore` mixin: the backup is written by `write_backup`.

    Keras writes the weights and the training metadata (`{"epoch", "batch"}`
    JSON, which it reads back to resume) straight into place; a subclass
    implements `write_backup(weights_path, metadata_path, metadata)` to
    write them another way (atomically).
    """

    def _save_model(self):
        self.write_backup(
            self._weights_path,
            self._training_metadata_path,
            {"epoch": self._current_epoch, "batch": self._last_batch_seen},
        )

    def write_backup(self, weights_path, metadata_path, metadata):
        raise NotImplementedError


def sublayers(layer):
    """Every layer inside `layer`, at any depth (not `layer` itself)."""
    return list(layer._flatten_layers(include_self=False, recursive=True))
