"""`python -m keras_vit_cli ...` is the `keras-vit` command."""

from keras_vit_cli import main

raise SystemExit(main())
