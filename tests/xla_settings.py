"""The XLA settings the tests compile with (set by conftest.py, before any framework loads; keras-free).

On the tiny test models compiling, not running, is the cost (JAX compiles every eager op), so the tests skip
XLA's optimizing passes and let the CPU backend emit fused loops the older, simpler way: each takes about 40 % off
a small compile. Measured on the 2-core machine (docs/development.md, "Test budget"): the optimizing
passes off took a jax run's compiles ~40 % faster, the fusion emitters off then took the whole jax run from 627 to
507 s. Results move in the last bits only, against a user's default settings; no test compares across settings
(tests/test_fixtures.py reads JAX outputs recorded at these).
"""

FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")


def with_fast_compile(flags):
    """`XLA_FLAGS` with the fast-compile settings added (each once)."""
    missing = [flag for flag in FAST_COMPILE_FLAGS if flag not in flags.split()]
    return " ".join([*flags.split(), *missing])
