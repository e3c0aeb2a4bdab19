"""`python -m keras_vit ...` runs the `keras-vit` command.

An entry point, not part of the library: the command line lives in the
`keras_vit_cli` package above it, which this only delegates to. On POSIX
the package itself hands over to `python -m keras_vit_cli` before it imports
Keras (see `keras_vit._hand_over_to_the_command_line`), and this never runs.
"""

import sys

from keras_vit_cli import main

sys.exit(main())
