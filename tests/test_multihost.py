"""Multi-process training on one machine: JAX processes on CPU devices, through JAX's distributed runtime."""

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_vit.training import multihost
from tests.helpers import BACKEND, FRAMEWORK_NOISE, REPO_ROOT, user_environment

jax_only = pytest.mark.skipif(BACKEND != "jax", reason="multi-process training runs on the jax backend")
HANG_GUARD_SECONDS = 600  # a guard against a hang, not a timing
STEPS = 3


@pytest.fixture
def no_cluster_env(monkeypatch):
    for name in [value for key, value in vars(multihost).items() if key.startswith("ENV_")]:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@jax_only
def test_settings_come_from_arguments_then_the_environment_and_are_checked(no_cluster_env):
    assert multihost.settings() is None  # nothing set: one process
    no_cluster_env.setenv(multihost.ENV_JOB_ADDRESSES, "10.0.0.1:1234,10.0.0.2:1234")
    no_cluster_env.setenv(multihost.ENV_NUM_PROCESSES, "2")
    no_cluster_env.setenv(multihost.ENV_PROCESS_ID, "1")
    assert multihost.settings() == multihost.Settings("10.0.0.1:1234", 2, 1)  # the first address coordinates
    assert multihost.settings("host:9", 4, 3) == multihost.Settings("host:9", 4, 3)
    no_cluster_env.delenv(multihost.ENV_JOB_ADDRESSES)
    no_cluster_env.setenv(multihost.ENV_JAX_COORDINATOR, "10.0.0.3:99")
    assert multihost.settings().coordinator_address == "10.0.0.3:99"
    for name in (multihost.ENV_NUM_PROCESSES, multihost.ENV_PROCESS_ID):
        no_cluster_env.delenv(name)
    assert multihost.settings("auto") == multihost.Settings(None, None, None)  # JAX detects the cluster
    bad = [("auto", 2, 0), ("host:1", 2, 2), ("host:1", 0, 0), ("host-without-port", 2, 0), ("host:1", 2, None)]
    for arguments in bad:
        with pytest.raises(ValueError):
            multihost.settings(*arguments)
    no_cluster_env.setenv(multihost.ENV_NUM_PROCESSES, "two")
    with pytest.raises(ValueError, match="KERAS_DISTRIBUTION_NUM_PROCESSES"):
        multihost.settings()


@pytest.mark.skipif(BACKEND != "tensorflow", reason="checks the refusal on a backend other than jax (one run)")
def test_initialize_refuses_backends_other_than_jax(no_cluster_env):
    with pytest.raises(ValueError, match="KERAS_BACKEND=jax"):
        multihost.initialize("localhost:1", 2, 0)


@jax_only
def test_a_single_process_run_is_untouched(no_cluster_env, tmp_path):
    import tensorflow as tf

    assert multihost.initialize() == multihost.ProcessInfo(1, 0)  # nothing set: returns at once
    assert multihost.is_primary() and multihost.data_shard() is None
    assert multihost.per_process_batch_size(8) == 8
    dataset = tf.data.Dataset.range(4).batch(2)
    assert multihost.split_batches(dataset) is dataset
    assert multihost.run_on_primary(lambda: "done", "write") == "done"
    assert multihost.check_same("the step", 3) == 3
    with pytest.raises(ValueError, match="global_batch_size"):
        multihost.per_process_batch_size(0)
    with pytest.raises(ValueError, match="heartbeat_timeout"):
        multihost.initialize(heartbeat_timeout=0)


def _start_processes(arguments, count=2):
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2")
    env.update(
        {multihost.ENV_JOB_ADDRESSES: f"localhost:{multihost.free_port()}", multihost.ENV_NUM_PROCESSES: str(count)}
    )
    return [
        subprocess.Popen(
            [sys.executable, *arguments],
            cwd=REPO_ROOT,
            env=dict(env, **{multihost.ENV_PROCESS_ID: str(index)}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(count)
    ]


def _finish(processes):
    results = []
    try:
        for process in processes:
            stdout, stderr = process.communicate(timeout=HANG_GUARD_SECONDS)
            results.append((process.returncode, stdout, stderr))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    return results


def _report(stdout, stderr):
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, stdout[-2000:] + stderr[-3000:]
    return json.loads(lines[0])


def _single_process_reference(initial, steps):
    from tests import multihost_worker

    model = multihost_worker.build_and_compile(steps)
    model.set_weights(initial)
    images, labels = multihost_worker.dataset_arrays(steps)
    # Process p reads examples p, p + 2, ... (tf.data shard); a global batch
    # is process 0's 4 examples followed by process 1's.
    half = multihost_worker.GLOBAL_BATCH // 2
    for step in range(steps):
        order = [2 * (step * half + j) + p for p in (0, 1) for j in range(half)]
        model.train_on_batch(images[order], labels[order])
    return [np.asarray(w) for w in model.get_weights()]


@jax_only
def test_two_processes_train_like_one_and_a_dead_peer_stops_the_other(tmp_path):
    worker = os.path.join(REPO_ROOT, "tests", "multihost_worker.py")
    results = _finish(_start_processes([worker, str(tmp_path), str(STEPS), "die"]))
    (code_0, out_0, err_0), (code_1, out_1, err_1) = results
    reports = [_report(out, err) for out, err in ((out_0, err_0), (out_1, err_1))]
    assert [r["process"] for r in reports] == [0, 1]
    for report in reports:
        assert report["processes"] == 2 and report["replicas"] == 2 and report["iterations"] == STEPS
    # The replicas hold the same weights.
    assert reports[0]["weight_sum"] == reports[1]["weight_sum"]
    # Files from process 0 only: one set.
    assert sorted(os.listdir(tmp_path)) == ["initial.npz", "trained.npz"]

    # The same steps on the same global batches in this single process.
    initial = list(np.load(tmp_path / "initial.npz").values())
    trained = list(np.load(tmp_path / "trained.npz").values())
    expected = _single_process_reference(initial, STEPS)
    assert max(float(np.abs(a - b).max()) for a, b in zip(initial, trained)) > 1e-3  # it did train
    assert max(float(np.abs(a - b).max()) for a, b in zip(expected, trained)) < 1e-5

    # Process 1 killed itself; process 0, waiting for it, ended with an error
    # instead of hanging (the hang guard in _finish fails the test otherwise).
    assert code_1 == -9
    assert code_0 != 0
    assert "passed the barrier" not in out_0
    assert "Connection reset by peer" in err_0 or "another task died" in err_0, err_0[-3000:]


@jax_only
def test_finetune_launched_in_two_processes_resumes_on_every_process_and_writes_once(tmp_path, monkeypatch):
    from keras_vit.training import finetune

    out = tmp_path / "run"
    options = ["--steps", "4", "--epochs", "2", "--batch-size", "16", "--verbose", "0", "--out", str(out)]

    class Killed(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                raise RuntimeError("killed")

    # A run stopped after its first epoch, in this process: its backup is what the two processes resume from.
    make_callbacks = finetune.make_callbacks
    monkeypatch.setattr(finetune, "make_callbacks", lambda config: make_callbacks(config) + [Killed()])
    with pytest.raises(RuntimeError, match="killed"):
        finetune.finetune(steps=4, epochs=2, batch_size=16, verbose=0, out=str(out))
    assert not (out / "metrics.json").exists()

    # The same command through the launcher, in a user's environment (the default verbosity): quiet.
    env = user_environment(PYTHONPATH=REPO_ROOT, KERAS_BACKEND="jax")
    for name in (multihost.ENV_JOB_ADDRESSES, multihost.ENV_NUM_PROCESSES, multihost.ENV_PROCESS_ID):
        env.pop(name, None)
    result = subprocess.run(
        [sys.executable, "-m", "keras_vit_cli", "launch", "--processes", "2", "finetune", *options],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert not FRAMEWORK_NOISE.findall(result.stderr), result.stderr[-4000:]
    # Process 0 alone prints the results and writes one set of files.
    assert re.findall(r"2 processes: started at step (\d+)", result.stdout) == ["2"], result.stdout
    assert result.stdout.count("held-out accuracy") == 1 and result.stdout.count("wrote ") == 1, result.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["start_step"], metrics["steps"], metrics["processes"], metrics["replicas"]) == (2, 4, 2, 2)
    assert (
        sorted(os.listdir(out)) == "checkpoint.keras history.csv metrics.json model.keras training_curves.png".split()
    )


# A peer blocked in a collective: JAX's preemption service catches SIGTERM, so it ignores it, mid-write.
BLOCKED_OR_KILLED_WORKER = """
import importlib.util, os, signal, sys, time
folder, index = sys.argv[2], os.environ["KERAS_DISTRIBUTION_PROCESS_ID"]
ready = os.path.join(folder, "blocked")
if index == "1":
    while not os.path.exists(ready):
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGKILL)
spec = importlib.util.spec_from_file_location("files", sys.argv[1])  # the file alone: no Keras to import
files = importlib.util.module_from_spec(spec)
spec.loader.exec_module(files)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with files.atomic_file(os.path.join(folder, "model.keras")) as staged, open(staged, "w") as handle:
    handle.write("half")
    handle.flush()
    open(ready, "w").close()
    time.sleep(30)  # past the bound: a launcher that waits for it fails the test
"""


@jax_only
def test_launch_ends_soon_when_a_process_is_killed_and_its_peer_ignores_sigterm(tmp_path, monkeypatch, capsys):
    import argparse
    import time

    from keras_vit.utils import files
    from keras_vit_cli.commands import launch

    # Workers of two seconds' Python instead of two JAX processes: the launcher's part is what is tested.
    monkeypatch.setattr(launch, "WORKER", [sys.executable, "-c", BLOCKED_OR_KILLED_WORKER, files.__file__])
    start = time.monotonic()
    code = launch.run(argparse.Namespace(processes=2, port=None, arguments=[str(tmp_path)]))
    elapsed = time.monotonic() - start
    assert code == 137  # 128 + SIGKILL, as a shell reports it
    assert "process 1 exited with -9" in capsys.readouterr().err
    assert elapsed < 15, f"the launcher took {elapsed:.0f} s to end"  # the bound
    # The blocked peer was killed mid-write: its output is absent, not half-written.
    assert (tmp_path / "blocked").exists() and not (tmp_path / "model.keras").exists()
