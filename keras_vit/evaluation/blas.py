"""One BLAS thread for the small, latency-bound linear algebra of the evaluations.

OpenBLAS's worker threads spin while they wait; on small matrices (a probe's
`(N, D) @ (D, C)` products, a `769 x 769` `eigh`) they cost more than they
give, and on a machine whose cores are busy they cost seconds: the digits
probe took 7.6 s with two threads and 0.17 s with one on a loaded 2-core
machine, an `eigh` of `XᵀX` 0.3-6 s against 0.13 s. `threadpoolctl` (a
scikit-learn dependency) sets the limit where it is installed; without it
the calls run as they are.
"""

import contextlib


def single_threaded():
    """A context manager that runs NumPy/SciPy's BLAS and LAPACK calls on one thread."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")
