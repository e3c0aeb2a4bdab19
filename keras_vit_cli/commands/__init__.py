"""The `keras-vit` commands, one module each, in the order `keras-vit --help` lists them.

Each module has a docstring (its help), `add_arguments(parser)` and
`run(args) -> exit code`; see `keras_vit_cli` for the protocol.
"""

COMMANDS = ("demo", "variants", "inspect", "finetune", "evaluate", "launch", "download", "convert", "predict", "export")
