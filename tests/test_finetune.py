"""The `keras-vit finetune` job end to end on a reduced setting, its settings, refusals and kill-and-resume."""

import json
import os
import signal
import subprocess
import sys
import time
import warnings

import keras
import numpy as np
import pytest

import keras_vit
import keras_vit_cli as cli
from keras_vit.models import find_vit
from keras_vit.training import finetune
from keras_vit_cli.commands import finetune as finetune_command
from tests.helpers import BACKEND, REPO_ROOT, write_images

# The digits job's model shrunk to 1 block of width 16: the job's plumbing does not depend on the model's size.
TINY_SMALL_CONFIG = dict(patch_size=4, hidden_dim=16, num_layers=1, num_heads=2, mlp_dim=32)
one_backend = pytest.mark.skipif(BACKEND != "tensorflow", reason="plain Python: the tensorflow run checks it")


@pytest.fixture(scope="module")
def reduced_run(tmp_path_factory):
    """`keras-vit finetune` in-process: 7 updates of 2 accumulated batches of 16 in 2 epochs (4 + 3), with
    layer-wise decay, remat and PatchDropout. Returns `(out, the metrics finetune returned)`."""
    out = str(tmp_path_factory.mktemp("reduced") / "run")
    argv = ["--steps", "7", "--epochs", "2", "--batch-size", "32", "--accumulation-steps", "2", "--layer-decay", "0.8"]
    returned = []
    run = finetune.finetune
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(finetune, "SMALL_CONFIG", TINY_SMALL_CONFIG)
        # The command calls keras_vit.training.finetune.finetune: kept, with what it returned.
        patch.setattr(finetune, "finetune", lambda **options: returned.append(run(**options)) or returned[-1])
        flags = ["--remat", "--patch-dropout", "0.5", "--verbose", "0", "--out", out]
        assert cli.main(["finetune", *argv, *flags]) == 0
    (metrics,) = returned
    return out, metrics


def test_reduced_main_job_writes_model_metrics_and_curves(reduced_run):
    out, metrics = reduced_run
    written = "checkpoint.keras confusion_matrix.png history.csv metrics.json model.keras training_curves.png"
    assert sorted(os.listdir(out)) == written.split()  # the backup is removed once finished
    on_disk = json.load(open(os.path.join(out, "metrics.json")))
    assert on_disk == metrics
    # 7 updates in 2 epochs (4 + 3): exactly 7 run, not 2 x 4.
    assert metrics["steps"] == 7 and metrics["start_step"] == 0
    assert metrics["class_names"] == [str(digit) for digit in range(10)]
    assert metrics["heldout_examples"] == 360 and metrics["train_examples"] == 1437
    assert 0.0 <= metrics["heldout_accuracy"] <= 1.0 and metrics["images_per_second"] > 0
    assert metrics["backend"] == BACKEND and metrics["layer_decay"] == 0.8
    assert metrics["remat"] is True and metrics["patch_dropout"] == 0.5
    report = metrics["heldout_report"]  # keras_vit.evaluation's held-out report of the same model
    assert report["top1"] == pytest.approx(metrics["heldout_accuracy"], abs=1e-6) and report["examples"] == 360
    assert list(report["per_class"]) == [str(digit) for digit in range(10)] and 0.0 <= report["ece"] <= 1.0
    with open(os.path.join(out, "training_curves.png"), "rb") as file:
        assert file.read(8) == b"\x89PNG\r\n\x1a\n"
    history = finetune.read_history(os.path.join(out, "history.csv"))
    assert history["epoch"] == [0.0, 1.0] and len(history["val_accuracy"]) == 2

    model = keras.saving.load_model(os.path.join(out, "model.keras"), safe_mode=True)
    assert keras_vit.class_names(model) == tuple(str(digit) for digit in range(10))
    vit = find_vit(model)
    assert vit.get_layer("encoder_block_0").remat and vit.get_layer("patch_dropout").rate == 0.5
    # The 1 block at 0.8, the embeddings below it at 0.8 ** 2.
    multipliers = model.optimizer.learning_rate_multipliers
    assert multipliers["encoder_block_0"] == pytest.approx(0.8)
    assert multipliers["patch_embedding"] == pytest.approx(0.8**2)
    # 7 updates from 14 batches; Keras schedules see the batch count, and the schedule spans exactly those 14.
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 7
    assert int(keras.ops.convert_to_numpy(model.optimizer._iterations)) == 14
    assert model.optimizer._learning_rate.total_steps == 14


@one_backend
def test_the_default_job_is_the_small_vit_on_a_fixed_stratified_digits_split():
    model = finetune.training_model(finetune.make_config(), 10)  # what the other tests shrink
    assert model.name == "vit_small_digits" and model.output_shape == (None, 10)
    assert model.get_layer("patch_embedding").weights[0].shape == (4, 4, 3, 64)  # 4x4 patches of 3 channels to 64
    assert (model.num_layers, model.num_heads, model.mlp_dim) == (4, 4, 128)
    (train, train_info), (evaluation, eval_info) = finetune.digits_sources()
    labels = np.array([int(label) for _, label in evaluation])
    again = np.array([int(label) for _, label in finetune.digits_sources()[1][0]])
    np.testing.assert_array_equal(labels, again)
    assert (train_info.num_examples, eval_info.num_examples) == (1437, 360)
    assert np.all(np.bincount(labels, minlength=10) >= 35)  # every digit held out ~36 times


@one_backend
@pytest.mark.parametrize(
    "flag, value",
    [
        ("steps", 0),
        ("epochs", 9),  # more epochs than steps
        ("learning_rate", 0.0),
        ("warmup_steps", 8),
        ("layer_decay", 1.5),
        ("label_smoothing", 1.0),
        ("cutmix", float("nan")),
        ("validation_split", 0.0),
        ("seed", -1),
        ("verbose", 3),
        ("optimizer", "adam"),
        ("patch_dropout", 1.0),
        ("remat", "yes"),
    ],
)
def test_config_rejects_zero_negative_and_out_of_range_values(flag, value):
    with pytest.raises(ValueError, match=flag):
        finetune.make_config(**({"steps": 8} | {flag: value}))


@one_backend
def test_config_resolves_defaults_and_batch_layout():
    config = finetune.make_config(steps=30)
    # 20 default epochs would hold 2 updates each: 15 epochs hold the 30.
    assert (config.epochs, config.batches_per_epoch, config.total_batches) == (15, 2, 30)
    assert config.optimizer == "adamw" and config.learning_rate == 2e-3 and config.label_smoothing == 0.1
    config = finetune.make_config(
        steps=10, epochs=3, batch_size=64, accumulation_steps=4, weights="x", model="ViTTi16", data="tfds:x"
    )
    assert (config.fit_batch_size, config.batches_per_epoch, config.total_batches) == (16, 16, 40)
    assert config.optimizer == "sgd" and config.learning_rate == pytest.approx(0.03 * 64 / 512)
    assert config.image_size == 224 and config.warmup_steps == 1 and config.label_smoothing == 0.0
    assert finetune.steps_per_execution(config) == 8
    config = finetune.make_config(steps=8, image_size=None, layer_decay=None, randaugment=1)
    assert config.image_size == 16 and config.layer_decay is None and config.randaugment is True
    with pytest.raises(TypeError, match="stpes"):
        finetune.make_config(stpes=3)
    # None is the default only where the default is None; a string is not read as on.
    for bad in (dict(validation_split=None), dict(model=""), dict(randaugment="no")):
        with pytest.raises(ValueError, match=next(iter(bad))):
            finetune.make_config(**bad)


@one_backend
def test_every_setting_is_a_config_field_a_flag_an_argument_and_a_docs_row():
    import argparse
    import dataclasses
    import inspect

    from keras_vit.training import settings
    from keras_vit.utils import docstrings
    from keras_vit_cli import options

    names = [setting.name for setting in settings.SETTINGS]
    assert [field.name for field in dataclasses.fields(finetune.FinetuneConfig)] == names
    assert list(inspect.signature(finetune.finetune).parameters) == names
    assert list(inspect.signature(finetune.make_config).parameters) == names
    assert list(docstrings.args_entries(finetune.finetune)) == names
    parser = argparse.ArgumentParser()
    finetune_command.add_arguments(parser)
    actions = [action for action in parser._actions if action.dest != "help"]
    assert [action.option_strings[0] for action in actions] == ["--" + name.replace("_", "-") for name in names]
    assert all(action.help for action in actions)
    defaults = {setting.name: setting.default for setting in settings.SETTINGS}
    assert {name: defaults[name] for name in ("model", "data", "out", "seed", "verbose")} == dict(
        model="small", data="digits", out="outputs/finetune", seed=0, verbose=1
    )
    with open(os.path.join(REPO_ROOT, "docs", "finetune.md")) as file:
        docs = file.read()
    assert settings.markdown_table() in docs, "regenerate the table: python -m keras_vit.training.settings"
    assert all(f"| `--{name.replace('_', '-')}` | `{name}` |" in docs for name in names)
    # A new setting is one declaration.
    extra = settings.SETTINGS + (settings.Setting("freeze_stem", bool, False, "freeze the patch embedding"),)
    parser = argparse.ArgumentParser()
    options.add_settings(parser, extra)
    assert vars(parser.parse_args(["--freeze-stem", "--steps", "3"])) == {"freeze_stem": True, "steps": 3}
    assert vars(parser.parse_args([])) == {}  # left out: the library's default applies
    assert "| `--freeze-stem` | `freeze_stem` | bool | off | freeze the patch embedding |" in settings.markdown_table(
        extra
    )
    assert settings.args_entries(extra)["freeze_stem"] == "freeze_stem: bool, freeze the patch embedding. Default: off."


def _write_images(folder, count, readable=True):
    """`count` 12x12 PNGs in `folder`, or text files named *.jpg that no decoder reads."""
    from PIL import Image

    os.makedirs(folder, exist_ok=True)
    for index in range(count):
        if readable:
            Image.fromarray(np.full((12, 12, 3), index * 20, np.uint8)).save(os.path.join(folder, f"{index}.png"))
        else:
            with open(os.path.join(folder, f"{index}.jpg"), "w") as file:
                file.write("not an image")


@pytest.mark.parametrize("case", ["unreadable", "unreadable held-out", "one class", "missing"])
def test_cli_refuses_unusable_image_folders_in_one_line_and_writes_nothing(tmp_path, capsys, case):
    # The refusal comes before any model, on every backend: no warning per file, no error out of `fit`.
    root = str(tmp_path / "images")
    if case == "unreadable held-out":
        for name in ("a", "b"):
            _write_images(os.path.join(root, "train", name), 2)
            _write_images(os.path.join(root, "val", name), 2, readable=False)
    for name in {"unreadable": ("a", "b"), "one class": ("a",)}.get(case, ()):
        _write_images(os.path.join(root, name), 3, readable=case != "unreadable")
    out = str(tmp_path / "run")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = cli.main(["finetune", "--data", root, "--steps", "2", "--batch-size", "2", "--out", out])
    (line,) = capsys.readouterr().err.splitlines()
    assert code == 2, line
    expected = {
        "unreadable": f"No readable images under {root} (training subset): all 5 image",
        "unreadable held-out": f"No readable images under {os.path.join(root, 'val')}: all 4 image",
        "missing": f"No image folder at {root!r} (nothing there)",
        "one class": f"{root} has 1 class ('a'); a classifier needs at least 2",
    }[case]
    assert line.startswith(f"keras-vit finetune: {expected}"), line
    assert [str(w.message) for w in caught] == []
    assert not os.path.exists(out)


# `keras-vit finetune` with the tiny model, in a process that waits after the first backup of its second epoch to be
# killed: the kill is mid-epoch whatever the machine's speed.
KILLED_RUN = f"""
import sys
import time

import keras

import keras_vit_cli
from keras_vit.training import finetune

finetune.SMALL_CONFIG = {TINY_SMALL_CONFIG!r}
make_callbacks = finetune.make_callbacks


class WaitMidEpoch2(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == 1:  # after the backup callback, which runs first
            time.sleep(600)


def with_wait(config):
    return make_callbacks(config) + [WaitMidEpoch2()]


finetune.make_callbacks = with_wait
sys.exit(keras_vit_cli.main(sys.argv[1:]))
"""
# 32 updates in 2 epochs of 16 batches, run 8 per call of the train function, with a backup after each call.
FINETUNE_ARGV = ["finetune", "--steps", "32", "--epochs", "2", "--batch-size", "16", "--backup-every", "4"]


@pytest.mark.skipif(BACKEND != "tensorflow", reason="one kill-and-resume run is enough")
def test_sigkill_mid_epoch_then_restart_resumes_from_backup(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(finetune, "SMALL_CONFIG", TINY_SMALL_CONFIG)
    out = str(tmp_path / "run")
    argv = [*FINETUNE_ARGV, "--verbose", "2", "--out", out]
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND=BACKEND)
    metadata = os.path.join(out, "backup", "training_metadata.json")
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, *argv],
        cwd=str(tmp_path),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 480
        # Kill once a backup exists mid-way through the second epoch.
        while time.time() < deadline and process.poll() is None:
            if os.path.exists(metadata) and json.load(open(metadata)).get("epoch") == 1:
                break
            time.sleep(0.05)
        assert process.poll() is None, "the run ended before it could be killed"
        process.send_signal(signal.SIGKILL)
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
    assert not os.path.exists(os.path.join(out, "model.keras"))
    backup = json.load(open(metadata))
    assert backup["epoch"] == 1  # epoch 0 finished and was backed up

    # Another run into the same folder is refused before any work, naming what differs; the backup stays.
    capsys.readouterr()
    other = [*argv[:2], "40", *argv[3:]]
    assert cli.main(other) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "steps 32 -> 40" in line
    assert json.load(open(metadata)) == backup

    # The same command again, in this process (nothing of the killed run is in it: all it resumes from is on disk).
    assert cli.main(argv) == 0
    # Resumed at epoch 2 of 2 (Keras numbers from 1): epoch 1 was not run again.
    shown = capsys.readouterr().out
    assert "Epoch 2/2" in shown and "Epoch 1/2" not in shown
    assert "32 steps (resumed from the backup at step 24)" in shown
    metrics = json.load(open(os.path.join(out, "metrics.json")))
    # The optimizer state came from the mid-epoch backup (the first one of epoch 2, after its 8th batch: 16 + 8
    # updates), and the resumed run stopped at the planned 32 updates although it repeated epoch 2 from its start.
    assert metrics["start_step"] == 24
    assert metrics["steps"] == 32
    assert not os.path.exists(os.path.join(out, "backup"))
    assert not [name for name in os.listdir(out) if name.startswith(".") or name.endswith(".tmp")]
    model = keras.saving.load_model(os.path.join(out, "model.keras"))
    outputs = keras.ops.convert_to_numpy(model(np.zeros((2, 16, 16, 3), "float32")))
    assert outputs.shape == (2, 10) and np.all(np.isfinite(outputs))
    history = finetune.read_history(os.path.join(out, "history.csv"))
    assert history["epoch"] == [0.0, 1.0]


@pytest.mark.skipif(BACKEND != "tensorflow", reason="one flat-folder MixUp run is enough")
def test_a_hybrid_on_a_flat_folder_with_mixup_finishes_and_predict_names_the_classes(tmp_path, capsys, monkeypatch):
    from PIL import Image

    from keras_vit.models.variants import VARIANTS

    tiny = dict(hidden_dim=32, num_layers=1, num_heads=2, mlp_dim=64, patch_size=8, resnet_stages=(), resnet_width=32)
    monkeypatch.setitem(VARIANTS, "R+Ti/16", tiny)

    root = tmp_path / "flowers"
    rng = np.random.default_rng(0)
    for name in ("daisy", "tulip"):
        (root / name).mkdir(parents=True)
        for index in range(10):
            pixels = rng.integers(0, 256, size=(20, 18, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / name / f"{index}.png")
    corrupt = str(root / "tulip" / "corrupt.jpg")
    with open(corrupt, "w") as file:
        file.write("not an image")
    out = str(tmp_path / "run")
    # 5 steps of 4 images read all 16 or 17 training files: an unreadable one among them is known too.
    arguments = ["--model", "ViTRTi16", "--data", str(root), "--image-size", "32", "--batch-size", "4", "--steps", "5"]
    assert cli.main(["finetune", *arguments, "--epochs", "1", "--mixup", "0.8", "--verbose", "0", "--out", out]) == 0
    shown = capsys.readouterr().out
    metrics = json.load(open(os.path.join(out, "metrics.json")))
    assert metrics["steps"] == 5 and metrics["mixup"] == 0.8
    assert metrics["class_names"] == ["daisy", "tulip"]
    assert metrics["unreadable_files"] == [corrupt]
    assert f"skipped 1 unreadable image file (listed in metrics.json), e.g. {corrupt}" in shown
    # validation_split 0.2 of 21 files: 4 held out; the 20 that decode are counted.
    assert metrics["train_examples"] + metrics["heldout_examples"] == 20 and metrics["heldout_examples"] in (3, 4)
    assert os.path.exists(os.path.join(out, "training_curves.png"))
    assert find_vit(keras.saving.load_model(os.path.join(out, "model.keras"))).resnet_stages == ()
    image = str(root / "daisy" / "0.png")
    assert cli.main(["predict", image, "--model", os.path.join(out, "model.keras"), "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sorted(line.split()[1] for line in lines[1:]) == ["daisy", "tulip"]


# On torch, where the job compiles fastest; the model's backends are test_naflex's, the pipelines' test_data's.
@pytest.mark.skipif(BACKEND != "torch", reason="one NaFlex run is enough")
def test_naflex_finetune_on_mixed_aspect_ratios_then_predict_and_evaluate(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(finetune, "SMALL_CONFIG", TINY_SMALL_CONFIG)
    root, out = str(tmp_path / "images"), str(tmp_path / "run")
    write_images(root, ("tall", "wide"), 6, ".png", seed=0, sizes=((12, 36), (36, 12), (20, 20)))  # 1:3, 3:1, 1:1
    arguments = ["--naflex", "16", "--data", root, *"--batch-size 4 --steps 2 --epochs 1 --randaugment".split()]
    assert cli.main(["finetune", *arguments, "--verbose", "0", "--out", out]) == 0
    metrics = json.load(open(os.path.join(out, "metrics.json")))
    assert metrics["naflex"] == 16 and metrics["image_size"] is None and metrics["steps"] == 2
    assert metrics["heldout_examples"] == 2 and metrics["heldout_report"]["examples"] == 2  # 0.2 of 12 files
    path = os.path.join(out, "model.keras")
    model = keras.saving.load_model(path)
    assert find_vit(model).max_num_patches == 16 and set(model.input) == {"patches", "spatial_shapes", "mask"}
    capsys.readouterr()
    # predict cuts each image, a panorama and a portrait, into the model's NaFlex input by itself.
    images = [os.path.join(root, "wide", name) for name in ("0.png", "1.png")]
    assert cli.main(["predict", *images, "--model", path, "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == images[0] and sorted(line.split()[1] for line in lines[1:3]) == ["tall", "wide"]
    evaluated = str(tmp_path / "evaluate")
    argv = ["evaluate", path, "--data", root, "--shots", "1", "--seeds", "1", "--k", "2", "--verbose", "0"]
    assert cli.main([*argv, "--out", evaluated]) == 0
    report = json.load(open(os.path.join(evaluated, "metrics.json")))
    assert report["test_examples"] == 2 and report["feature_dim"] == 16
    assert report["heldout"]["top1"] == pytest.approx(metrics["heldout_accuracy"], abs=1e-6)
    capsys.readouterr()
    refused = str(tmp_path / "refused")
    for argv, message in (
        (["predict", images[0], "--model", path, "--naflex", "8"], "as it was saved: leave out --naflex 8."),
        (["finetune", "--naflex", "16", "--mixup", "0.2"], "`naflex=16` cannot have `mixup`: images of different"),
        (["finetune", "--naflex", "16", "--image-size", "32"], "`naflex=16` cannot have `image_size`: each image"),
        (["evaluate", "ViTTi16", "--naflex", "16", "--image-size", "32"], "--image-size has no meaning with --naflex"),
    ):
        assert cli.main([*argv, "--out", refused] if argv[0] != "predict" else argv) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert message in line and not os.path.exists(refused), line
