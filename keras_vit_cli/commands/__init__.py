"""The `keras-vit` commands, one module each (see `keras_vit_cli`), in the order `keras-vit --help` lists them."""

COMMANDS = ("demo", "variants", "inspect", "finetune", "evaluate", "launch", "download", "convert", "predict", "export")
