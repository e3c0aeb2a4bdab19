"""`python -m keras_vit ...` is the `keras-vit` command."""

import sys

from keras_vit.cli import main

sys.exit(main())
