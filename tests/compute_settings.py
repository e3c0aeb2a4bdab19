"""The settings the tests compute with (set by conftest.py before any framework loads; keras-free).

On the tiny test models compiling, not running, is the cost (JAX compiles every eager op): the tests skip XLA's
optimizing passes and the CPU backend's fusion emitters. On torch each process computes on one thread: the suite runs
one worker per core, and torch's OpenMP pool and tf.data's pools (spinning while they wait) oversubscribed them;
TensorFlow and JAX keep their pools, which they use well. Results move in the last bits only; tests/test_fixtures.py
reads outputs recorded at these settings (docs/development.md, "Test budget").
"""

FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")
TORCH_THREADS = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
}


def with_fast_compile(flags):
    """`XLA_FLAGS` with the fast-compile settings added (each once)."""
    missing = [flag for flag in FAST_COMPILE_FLAGS if flag not in flags.split()]
    return " ".join([*flags.split(), *missing])


def apply(environ):
    """Puts the settings into `environ` (`os.environ`, inherited by every process started after) for its backend."""
    environ["XLA_FLAGS"] = with_fast_compile(environ.get("XLA_FLAGS", ""))
    if environ.get("KERAS_BACKEND") == "torch":
        environ.update(TORCH_THREADS)
