"""The XLA settings the tests compile with (set by conftest.py before any framework loads; keras-free).

On the tiny test models compiling, not running, is the cost (JAX compiles every eager op): the tests skip XLA's
optimizing passes and the CPU backend's fusion emitters (docs/development.md, "Test budget"). Results move in the
last bits only; tests/test_fixtures.py reads JAX outputs recorded at these settings.
"""

FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")


def with_fast_compile(flags):
    """`XLA_FLAGS` with the fast-compile settings added (each once)."""
    missing = [flag for flag in FAST_COMPILE_FLAGS if flag not in flags.split()]
    return " ".join([*flags.split(), *missing])
