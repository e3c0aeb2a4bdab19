"""Run a keras-vit command as several local processes of one JAX training run.

    KERAS_BACKEND=jax keras-vit launch --processes 2 finetune --steps 200

If one process fails, the others are stopped (killed after a few seconds) and its exit code is returned.
For several hosts, run the command on each with --coordinator,
--num-processes and --process-id instead.
"""

import argparse
import os
import subprocess
import sys
import time

from keras_vit_cli import quiet

WORKER = [sys.executable, "-m", "keras_vit_cli"]  # each process runs this, then the command's arguments
# JAX's preemption service catches SIGTERM: a process blocked in a collective ends only when killed.
STOP_SECONDS = 3


def add_arguments(parser):
    parser.add_argument("--processes", type=int, default=2, help="local processes to start (default: %(default)s)")
    parser.add_argument("--port", type=int, default=None, help="the coordinator's port (default: a free one)")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="the keras-vit command each process runs")


def check(args):
    if args.arguments[:1] == ["--"]:
        args.arguments = args.arguments[1:]
    if not args.arguments:
        raise ValueError("`keras-vit launch` needs the command to run, e.g. `keras-vit launch --processes 2 finetune`.")
    backend = quiet.keras_backend()
    if backend != "jax":
        raise ValueError(f"Several processes train one model on JAX only: set KERAS_BACKEND=jax. Received: {backend!r}")


def run(args):
    from keras_vit.training import multihost
    from keras_vit.utils import validation

    count = validation.positive_int("processes", args.processes)
    port = multihost.free_port() if args.port is None else validation.positive_int("port", args.port)
    processes = []
    for index in range(count):
        settings = {
            multihost.ENV_JOB_ADDRESSES: f"localhost:{port}",
            multihost.ENV_NUM_PROCESSES: str(count),
            multihost.ENV_PROCESS_ID: str(index),
        }
        command = [*WORKER, *args.arguments]
        processes.append(subprocess.Popen(command, env=dict(os.environ, **settings)))
    try:
        while True:
            codes = [process.poll() for process in processes]
            for index, code in enumerate(codes):
                if code not in (None, 0):
                    message = f"keras-vit launch: process {index} exited with {code}; stopping the others."
                    print(message, file=sys.stderr)
                    return code if code > 0 else 128 - code  # killed by signal N: 128 + N, as a shell reports it
            if all(code == 0 for code in codes):
                return 0
            time.sleep(0.5)
    finally:
        stop(processes)


def stop(processes):
    """Terminates the processes still running, and kills those not ended `STOP_SECONDS` later."""
    running = [process for process in processes if process.poll() is None]
    for process in running:
        process.terminate()
    deadline = time.monotonic() + STOP_SECONDS
    for process in running:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
