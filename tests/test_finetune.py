"""The `keras-vit finetune` main job, end to end on a reduced setting, and
kill-and-resume (SIGKILL a training process, restart the same command)."""

import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from keras_vit import cli, finetune
from tests.helpers import BACKEND, REPO_ROOT


def test_reduced_main_job_writes_model_metrics_and_curves(tmp_path):
    out = str(tmp_path / "run")
    # Batch 32 per update from 2 accumulated batches of 16, with layer-wise decay.
    metrics = finetune.finetune(
        steps=8, epochs=2, batch_size=32, accumulation_steps=2, layer_decay=0.8, out=out, verbose=0
    )
    assert sorted(os.listdir(out)) == [
        "checkpoint.keras",
        "history.csv",
        "metrics.json",
        "model.keras",
        "training_curves.png",
    ]  # the backup is removed once finished
    on_disk = json.load(open(os.path.join(out, "metrics.json")))
    assert on_disk == metrics
    assert metrics["steps"] == 8 and metrics["start_step"] == 0
    assert metrics["heldout_examples"] == 360 and metrics["train_examples"] == 1437
    assert 0.0 <= metrics["heldout_accuracy"] <= 1.0 and metrics["images_per_second"] > 0
    assert metrics["backend"] == BACKEND and metrics["layer_decay"] == 0.8
    with open(os.path.join(out, "training_curves.png"), "rb") as file:
        assert file.read(8) == b"\x89PNG\r\n\x1a\n"
    history = finetune.read_history(os.path.join(out, "history.csv"))
    assert history["epoch"] == [0.0, 1.0] and len(history["val_accuracy"]) == 2

    model = keras.saving.load_model(os.path.join(out, "model.keras"))
    assert model.optimizer.learning_rate_multipliers["encoder_block_0"] == pytest.approx(0.8**4)  # 4 blocks
    # 8 updates from 16 batches; Keras schedules see the batch count, and the schedule spans exactly those 16.
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 8
    assert int(keras.ops.convert_to_numpy(model.optimizer._iterations)) == 16
    assert model.optimizer._learning_rate.total_steps == 16
    (train, _), (evaluation, _) = finetune.digits_sources()
    from keras_vit import data

    images, labels = next(iter(data.eval_pipeline(evaluation, image_size=16, batch_size=360)))
    accuracy = np.mean(np.argmax(keras.ops.convert_to_numpy(model(np.asarray(images))), -1) == np.asarray(labels))
    assert accuracy == pytest.approx(metrics["heldout_accuracy"], abs=1e-6)


def test_digits_split_is_fixed_and_stratified():
    (train, train_info), (evaluation, eval_info) = finetune.digits_sources()
    labels = np.array([int(label) for _, label in evaluation])
    again = np.array([int(label) for _, label in finetune.digits_sources()[1][0]])
    np.testing.assert_array_equal(labels, again)
    assert (train_info.num_examples, eval_info.num_examples) == (1437, 360)
    assert np.all(np.bincount(labels, minlength=10) >= 35)  # every digit held out ~36 times


def test_cli_reports_bad_arguments(capsys, tmp_path):
    assert cli.main(["finetune", "--model", "ViTZ99", "--steps", "1", "--out", str(tmp_path)]) == 2
    assert "Unknown model 'ViTZ99'" in capsys.readouterr().err
    assert cli.main(["finetune", "--model", "small", "--weights", "x", "--out", str(tmp_path)]) == 2
    assert "no pretrained weights" in capsys.readouterr().err
    assert cli.main(["finetune", "--batch-size", "10", "--accumulation-steps", "4", "--out", str(tmp_path)]) == 2
    assert "divisor of `batch_size`" in capsys.readouterr().err


def _command(out):
    return [
        sys.executable,
        "-m",
        "keras_vit",
        "finetune",
        "--steps",
        "80",
        "--epochs",
        "2",
        "--batch-size",
        "16",
        "--backup-every",
        "4",
        "--verbose",
        "2",
        "--out",
        out,
    ]


@pytest.mark.skipif(BACKEND != "tensorflow", reason="one kill-and-resume run is enough (tensorflow run)")
def test_sigkill_mid_epoch_then_restart_resumes_from_backup(tmp_path):
    out = str(tmp_path / "run")
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND=BACKEND)
    metadata = os.path.join(out, "backup", "training_metadata.json")
    process = subprocess.Popen(
        _command(out), cwd=str(tmp_path), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.time() + 480
        # Kill once a backup exists mid-way through the second epoch.
        while time.time() < deadline and process.poll() is None:
            if os.path.exists(metadata) and json.load(open(metadata)).get("epoch") == 1:
                break
            time.sleep(0.05)
        assert process.poll() is None, "the run finished before it could be killed"
        process.send_signal(signal.SIGKILL)
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
    assert not os.path.exists(os.path.join(out, "model.keras"))
    backup = json.load(open(metadata))
    assert backup["epoch"] == 1  # epoch 0 finished and was backed up

    restart = subprocess.run(_command(out), cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=480)
    assert restart.returncode == 0, restart.stderr[-3000:]
    # Resumed at epoch 2 of 2 (Keras numbers from 1): epoch 1 was not run again.
    assert "Epoch 2/2" in restart.stdout and "Epoch 1/2" not in restart.stdout
    metrics = json.load(open(os.path.join(out, "metrics.json")))
    # The optimizer state came from the mid-epoch backup (the first backup of
    # epoch 2 is after its 8th batch), and the resumed run stopped at the
    # planned 80 updates although it repeated epoch 2 from its start.
    assert 48 <= metrics["start_step"] < 80
    assert metrics["steps"] == 80
    assert not os.path.exists(os.path.join(out, "backup"))
    assert not [name for name in os.listdir(out) if name.startswith(".") or name.endswith(".tmp")]
    model = keras.saving.load_model(os.path.join(out, "model.keras"))
    outputs = keras.ops.convert_to_numpy(model(np.zeros((2, 16, 16, 3), "float32")))
    assert outputs.shape == (2, 10) and np.all(np.isfinite(outputs))
    history = finetune.read_history(os.path.join(out, "history.csv"))
    assert history["epoch"] == [0.0, 1.0]
