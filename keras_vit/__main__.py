"""`python -m keras_vit ...` runs the `keras-vit` command.

An entry point, not part of the library: the command line lives in the
`keras_vit_cli` package above it, which this only delegates to.
"""

import sys

from keras_vit_cli import main

sys.exit(main())
