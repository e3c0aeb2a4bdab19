"""The settings of the `keras-vit finetune` job, each declared once.

`SETTINGS` gives `FinetuneConfig`'s fields, `finetune`'s checks and signature, the command line's flags and
`docs/finetune.md`'s table (`python -m` it).
"""

import dataclasses
import inspect
import textwrap

DIGITS = "digits"
SMALL_MODEL = "small"
OPTIMIZERS = ("auto", "sgd", "adamw")
STRATEGIES = ("auto", "default", "mirrored", "tpu")
PRECISIONS = ("auto", "float32", "mixed_bfloat16", "mixed_float16")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting: an argument of `finetune` and a `keras-vit finetune` flag.

    `check(name, value) -> value` raises `ValueError`; `shown` is how a default that is not the value reads (a `None`
    default is resolved by `finetune.make_config`).
    """

    name: str
    type: type
    default: object
    help: str
    check: object = None
    shown: object = None
    choices: object = None

    @property
    def flag(self):
        return "--" + self.name.replace("_", "-")

    def validate(self, value):
        if self.choices is not None:
            value = _validation("one_of", choices=self.choices)(self.name, value)
        return value if self.check is None else self.check(self.name, value)

    @property
    def default_text(self):
        if self.shown is not None:
            return self.shown
        return "off" if self.default is False else str(self.default)


def _validation(rule, **limits):
    # Imported when used: this module imports only the standard library.
    def check(name, value):
        from keras_vit.utils import validation

        return getattr(validation, rule)(name, value, **limits)

    return check


def _text(name, value):
    if not isinstance(value, str) or not value:
        raise ValueError(f"`{name}` must be a non-empty string. Received: {name}={value!r}")
    return value


def _switch(name, value):
    """A bool, or 0 / 1 (a string such as "no" is refused, never read as on)."""
    if value not in (True, False) or not isinstance(value, (bool, int)):
        raise ValueError(f"`{name}` must be True or False. Received: {name}={value!r}")
    return bool(value)


def _output_folder(name, value):
    # A file in the way, or no write access, fails before any work.
    from keras_vit.utils import files

    return files.check_output_folder(_text(name, value))


_POSITIVE = _validation("positive_int")
_NON_NEGATIVE = _validation("non_negative_int")
_ALPHA = _validation("finite_float", minimum=0)

# fmt: off
SETTINGS = (
    Setting("model", str, SMALL_MODEL, "'small' (the digits model) or a constructor such as ViTB16", _text),
    Setting("weights", str, None, "pretrained weights tag passed to the constructor", shown="random initialisation"),
    Setting("data", str, DIGITS, "'digits', 'tfds:NAME', or an image folder root/<split>/<class>/ or root/<class>/",
            _text),
    Setting("train_split", str, "train", "training split (TFDS, or folder root/<split>/)", _text),
    Setting("eval_split", str, None, "held-out split", shown="validation, val or test"),
    Setting("data_dir", str, None, "TFDS data directory", shown="TFDS's own"),
    Setting("validation_split", float, 0.2, "held-out fraction of a flat image folder root/<class>/",
            _validation("finite_float", minimum=0, maximum=1, include_minimum=False, include_maximum=False)),
    Setting("image_size", int, None, "square input size in pixels", _POSITIVE, shown="16 (digits), else 224"),
    Setting("naflex", int, None, "NaFlex: each image keeps its aspect ratio, resized to at most this many patches "
            "(e.g. 256); no crop, no --image-size, --mixup, --cutmix or --patch-dropout", _POSITIVE, shown="off"),
    Setting("batch_size", int, None, "images per optimizer update (all replicas, all accumulated batches)",
            _POSITIVE, shown="64 (digits), else 512"),
    Setting("steps", int, None, "optimizer updates, exactly", _POSITIVE, shown="1500 (digits), else 10000"),
    Setting("epochs", int, None, "evaluation/checkpoint rounds the steps are divided into (<= steps)", _POSITIVE,
            shown="20 (digits), else 10"),
    Setting("learning_rate", float, None, "peak learning rate",
            _validation("finite_float", minimum=0, include_minimum=False), shown="0.03 x batch/512 (sgd), else 2e-3"),
    Setting("optimizer", str, "auto", "sgd (the official fine-tune recipe), adamw (the pre-training recipe) or "
            "auto: sgd with --weights, else adamw", _validation("one_of", choices=OPTIMIZERS)),
    Setting("warmup_steps", int, None, "linear warmup updates (< steps)", _NON_NEGATIVE,
            shown="10% of the steps, at most 500"),
    Setting("accumulation_steps", int, 1, "batches per update, a divisor of the batch: 8 gives 512 = 8 x 64",
            _POSITIVE),
    Setting("layer_decay", float, None, "layer-wise learning-rate decay in (0, 1], e.g. 0.75",
            _validation("finite_float", minimum=0, maximum=1, include_minimum=False), shown="off"),
    Setting("label_smoothing", float, None, "label smoothing in [0, 1)", _validation("rate"),
            shown="0.1 without --weights, else 0"),
    Setting("randaugment", bool, False, "RandAugment on the training crops", _switch),
    Setting("mixup", float, 0.0, "MixUp alpha, 0 for none", _ALPHA),
    Setting("cutmix", float, 0.0, "CutMix alpha, 0 for none", _ALPHA),
    Setting("remat", bool, False, "recompute each transformer block in the backward pass: less training memory "
            "for one more forward pass of the blocks", _validation("boolean")),
    Setting("patch_dropout", float, 0.0, "PatchDropout: the fraction of patch tokens each training image drops, "
            "in [0, 1), e.g. 0.5 (0: off); evaluation and predictions use every token", _validation("rate")),
    Setting("lora", int, None, "LoRA: train only adapters of this rank on the attention projections, and the head "
            "(e.g. 8)", _POSITIVE, shown="off"),
    Setting("strategy", str, "auto", "tf.distribute strategy: auto, default, mirrored or tpu", choices=STRATEGIES),
    Setting("precision", str, "auto", "auto (mixed_bfloat16 where supported, else float32), float32, "
            "mixed_bfloat16 or mixed_float16", choices=PRECISIONS),
    Setting("backup_every", int, 0, "batches between resumable backups (0: every epoch)", _NON_NEGATIVE),
    Setting("out", str, "outputs/finetune", "output folder", _output_folder),
    Setting("seed", int, 0, "seed of the data order, augmentation and initialisation", _NON_NEGATIVE),
    Setting("verbose", int, 1, "0 silent, 1 progress bar, 2 one line per epoch", choices=(0, 1, 2)),
    Setting("coordinator", str, None, "multi-process run (JAX): host:port of process 0, or 'auto' where JAX "
            "detects the cluster (Cloud TPU, SLURM)", shown="KERAS_DISTRIBUTION_JOB_ADDRESSES, else one process"),
    Setting("num_processes", int, None, "processes of the multi-process run", shown="KERAS_DISTRIBUTION_*"),
    Setting("process_id", int, None, "this process, 0 to --num-processes - 1", shown="KERAS_DISTRIBUTION_*"),
    Setting("heartbeat_timeout", int, 100, "seconds before the processes give up on a silent one", _POSITIVE),
)
# fmt: on
BY_NAME = {setting.name: setting for setting in SETTINGS}


def parse(options):
    """Every setting's value, in `SETTINGS` order: `options` (a dict) checked, the others at their defaults."""
    unknown = sorted(set(options) - set(BY_NAME))
    if unknown:
        raise TypeError(f"Unknown fine-tune setting(s) {unknown}. The settings: {', '.join(BY_NAME)}.")
    values = {}
    for setting in SETTINGS:
        value = options.get(setting.name, setting.default)
        if setting.name in options and (value is not None or setting.default is not None):
            value = setting.validate(value)
        values[setting.name] = value
    return values


def signature():
    """The keyword arguments of `finetune`, with the settings' defaults (for `help`)."""
    return inspect.Signature(
        [inspect.Parameter(s.name, inspect.Parameter.KEYWORD_ONLY, default=s.default) for s in SETTINGS]
    )


def args_entries(settings=SETTINGS):
    """The `Args:` entry of each of `settings` (`keras_vit.utils.docstrings`), wrapped."""
    wrap = dict(width=72, subsequent_indent="    ", break_on_hyphens=False, break_long_words=False)
    return {
        s.name: textwrap.fill(f"{s.name}: {s.type.__name__}, {s.help}. Default: {s.default_text}.", **wrap)
        for s in settings
    }


def markdown_table(settings=SETTINGS):
    """`settings` as the Markdown table of `docs/finetune.md`."""
    rows = ["| flag | argument | type | default | what it sets |", "| --- | --- | --- | --- | --- |"]
    for s in settings:
        # "\<" keeps root/<class>/ from reading as an HTML tag.
        cells = (f"`{s.flag}`", f"`{s.name}`", s.type.__name__, s.default_text, s.help.replace("<", "\\<"))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
