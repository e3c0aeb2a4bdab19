"""One BLAS thread for the evaluations' small linear algebra (docs/evaluation.md has the measurements)."""

import contextlib


def single_threaded():
    """A context manager that runs NumPy/SciPy's BLAS calls on one thread (where `threadpoolctl` is installed)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")
