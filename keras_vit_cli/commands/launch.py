"""Run a keras-vit command as several local processes of one JAX training run.

    KERAS_BACKEND=jax keras-vit launch --processes 2 finetune --steps 200

Each process runs `python -m keras_vit_cli COMMAND ...` with the
KERAS_DISTRIBUTION_* settings of its rank and the coordinator on localhost
(see `keras_vit.training.multihost`); if one process fails, the others are stopped
and the exit code is the failed one's. For several hosts, run the command
once per host with --coordinator, --num-processes and --process-id instead.
"""

import argparse


def add_arguments(parser):
    parser.add_argument("--processes", type=int, default=2, help="local processes to start (default: %(default)s)")
    parser.add_argument("--port", type=int, default=None, help="the coordinator's port (default: a free one)")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="the keras-vit command each process runs")


def launch_local(arguments, num_processes, port=None, poll_interval=0.5):
    """Runs `python -m keras_vit_cli ARGUMENTS` as `num_processes` local processes.

    Returns 0 if all succeed, else the first failure's exit code (the
    shell's 128 + N for a process killed by signal N).
    """
    import os
    import subprocess
    import sys
    import time

    from keras_vit.training import multihost
    from keras_vit.utils import validation

    validation.positive_int("num_processes", num_processes)
    port = multihost.free_port() if port is None else validation.positive_int("port", port)
    processes = []
    for index in range(num_processes):
        settings = {
            multihost.ENV_JOB_ADDRESSES: f"localhost:{port}",
            multihost.ENV_NUM_PROCESSES: str(num_processes),
            multihost.ENV_PROCESS_ID: str(index),
        }
        command = [sys.executable, "-m", "keras_vit_cli", *arguments]
        processes.append(subprocess.Popen(command, env=dict(os.environ, **settings)))
    try:
        while True:
            codes = [process.poll() for process in processes]
            failed = [(index, code) for index, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                index, code = failed[0]
                print(f"keras-vit launch: process {index} exited with {code}; stopping the others.", file=sys.stderr)
                return code if code > 0 else 128 - code
            if all(code == 0 for code in codes):
                return 0
            time.sleep(poll_interval)
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def run(args):
    if args.arguments and args.arguments[0] == "--":
        args.arguments = args.arguments[1:]
    if not args.arguments:
        raise ValueError("`keras-vit launch` needs the command to run, e.g. `keras-vit launch --processes 2 finetune`.")
    import keras

    if keras.backend.backend() != "jax":
        # Checked once here: each process would fail with the same error, all of them printing it.
        raise ValueError(
            "Several processes train one model on the JAX backend only: set KERAS_BACKEND=jax. "
            f"Received: backend={keras.backend.backend()!r}"
        )
    return launch_local(args.arguments, args.processes, port=args.port)
