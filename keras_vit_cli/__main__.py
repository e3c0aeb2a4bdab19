"""`python -m keras_vit_cli ...` is the `keras-vit` command."""

import sys

from keras_vit_cli import main

sys.exit(main())
