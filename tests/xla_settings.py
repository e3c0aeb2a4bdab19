"""The XLA setting the tests compile with (set by conftest.py, before any framework loads; keras-free)."""

# Without XLA's optimizing passes: on the tiny test models compiling, not running, is the cost.
FAST_COMPILE = "--xla_backend_optimization_level=0"


def with_fast_compile(flags):
    """`XLA_FLAGS` with the fast-compile setting added (once)."""
    return flags if FAST_COMPILE in flags else f"{flags} {FAST_COMPILE}".strip()


def without_fast_compile(flags):
    """`XLA_FLAGS` as a user's process has it: the fast-compile setting removed."""
    return flags.replace(FAST_COMPILE, "").strip()
