"""Runs the README's code blocks, in order, in this one process (`tests/test_readme.py` starts it).

    python tests/readme_runner.py PLAN.json     # in a working folder that stands in for a clone

The plan lists the world to put in place (`readme_world.WORLD` keys) and the blocks, already substituted:
`{"world": [...], "blocks": [{"line": N, "language": "python", "code": ...} | {..., "commands": [[N, ...]]}]}`.
One process for every block: importing TensorFlow alone takes ~15 s. A Python block runs in a fresh namespace
and Keras's global state (dtype policy, session) is reset after it, as a fresh interpreter would have it. A shell
command runs in-process when it is `keras-vit`, `python -m MODULE` or `python FILE`; `make TARGET` runs the
commands of the Makefile's recipe (`make -n`, bootstrap left out: it built the environment this runs in); a
command for another Keras backend runs in a subprocess; a command already run (the same text) is not run again.
Anything else is an error: run it through one of these or mark its block as not run in the README. Prints one
line per block and command; exits 1 on the first failure.
"""

import json
import os
import runpy
import shlex
import subprocess
import sys
import time
import traceback

import pytest
import readme_world

BACKEND = os.environ.get("KERAS_BACKEND", "tensorflow")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class CommandFailed(Exception):
    pass


def _reset_keras():
    import keras

    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session()


def run_python(code, line):
    # Padded so that a traceback names the README's own line numbers.
    compiled = compile("\n" * line + code, "README.md", "exec")
    try:
        exec(compiled, {"__name__": "__main__"})
    finally:
        _reset_keras()


def _exit_code(function):
    try:
        code = function()
    except SystemExit as exit:
        code = exit.code
    return 0 if code is None else code if isinstance(code, int) else 1


def _run_module_or_file(args):
    """`python -m MODULE ARGS` or `python FILE ARGS`, in-process, with `sys.argv` as Python would set it."""
    saved = sys.argv
    try:
        if args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            return _exit_code(lambda: runpy.run_module(args[1], run_name="__main__", alter_sys=True))
        sys.argv = list(args)
        return _exit_code(lambda: runpy.run_path(args[0], run_name="__main__"))
    finally:
        sys.argv = saved


def _make_recipe(args):
    """The commands `make ARGS` would run, bootstrap (which built this environment) left out."""
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "-o", "bootstrap", *args], capture_output=True, text=True, check=False
    )
    if dry.returncode != 0:
        raise CommandFailed(f"make -n {' '.join(args)} failed: {dry.stderr.strip()}")
    return [line for line in dry.stdout.splitlines() if line.strip()]


def _split_environment(words):
    environment = {}
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        name, value = words.pop(0).split("=", 1)
        environment[name] = value
    return environment, words


def _in_process(words):
    program = os.path.basename(words[0])
    if program == "keras-vit":
        import keras_vit_cli

        return _exit_code(lambda: keras_vit_cli.main(words[1:]))
    if program in ("python", "python3"):
        return _run_module_or_file(words[1:])
    if program == "make":
        if "-n" in words:
            return subprocess.run(words, check=False).returncode
        for command in _make_recipe(words[1:]):
            run_command(command)
        return 0
    raise CommandFailed(
        f"`{words[0]}` is not a command the README runner knows: use keras-vit, python or make, "
        "or mark the block as not run (see tests/test_readme.py)"
    )


def run_command(command):
    words = [os.path.expanduser(word) for word in shlex.split(command, comments=True)]  # as an unquoted ~ is
    environment, words = _split_environment(words)
    if not words:
        return
    if environment.get("KERAS_BACKEND", BACKEND) != BACKEND:
        # Another backend needs its own interpreter; `python -m keras_vit_cli` is the `keras-vit` script.
        if os.path.basename(words[0]) != "keras-vit":
            raise CommandFailed(f"only keras-vit runs on another backend here: {command}")
        words = [sys.executable, "-m", "keras_vit_cli", *words[1:]]
        code = subprocess.run(words, env={**os.environ, **environment}, check=False).returncode
    else:
        saved = {name: os.environ.get(name) for name in environment}
        os.environ.update(environment)
        try:
            code = _in_process(words)
        finally:
            for name, value in saved.items():
                os.environ.pop(name) if value is None else os.environ.__setitem__(name, value)
    if code != 0:
        raise CommandFailed(f"exit code {code}: {command}")


def run_block(block, done):
    """Runs a block; `done` maps each shell command already run to its README line (a repeat is not run again)."""
    if block["language"] == "python":
        run_python(block["code"], block["line"])
        return
    for line, command in block["commands"]:
        if command in done:
            print(f"readme_runner: README.md:{line} ran at README.md:{done[command]}: {command}", flush=True)
            continue
        start = time.perf_counter()
        run_command(command)
        done[command] = line
        print(f"readme_runner: README.md:{line} ok in {time.perf_counter() - start:.1f} s: {command}", flush=True)


def main(plan_path):
    with open(plan_path) as file:
        plan = json.load(file)
    patch = pytest.MonkeyPatch()
    for name in plan["world"]:
        start = time.perf_counter()
        readme_world.WORLD[name](patch)
        print(f"readme_runner: world {name!r} in place in {time.perf_counter() - start:.1f} s", flush=True)
    done = {}
    for block in plan["blocks"]:
        start = time.perf_counter()
        try:
            run_block(block, done)
        except Exception:
            traceback.print_exc()
            print(f"readme_runner: the {block['language']} block at README.md:{block['line']} FAILED", flush=True)
            return 1
        elapsed = time.perf_counter() - start
        print(f"readme_runner: {block['language']} block at README.md:{block['line']} ok in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
