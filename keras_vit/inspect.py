"""Deprecated: `keras_vit.inspect` is now `keras_vit.inspection`.

The old name shadowed the standard library's `inspect` module in the user's
namespace (`from keras_vit import inspect`). It keeps working, with a
`DeprecationWarning`, until keras_vit 0.3.
"""

import warnings

from keras_vit.inspection import *  # noqa: F403 (the whole public API, as before)
from keras_vit.inspection import __all__  # noqa: F401

warnings.warn(
    "`keras_vit.inspect` is deprecated and will be removed in keras_vit 0.3: "
    "use `keras_vit.inspection` (the old name shadows the standard library's `inspect`).",
    DeprecationWarning,
    stacklevel=2,
)
