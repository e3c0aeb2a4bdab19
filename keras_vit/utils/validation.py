"""Argument checks: each returns the normalised value or raises a one-line `ValueError` ("Received: name=value").

Booleans are never numbers here (`True` is an `int` to Python, never a size to a user); NumPy's integers and
floats count as Python's and come back as Python's.
"""

import math
import numbers


def is_int(value):
    """Whether `value` is an integer, Python's or NumPy's, never a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def boolean(name, value):
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be True or False. Received: {name}={value!r}")
    return value


def positive_int(name, value):
    """Returns `value` as an int >= 1."""
    if not is_int(value) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}")
    return int(value)


def non_negative_int(name, value):
    if not is_int(value) or value < 0:
        raise ValueError(f"`{name}` must be an integer >= 0. Received: {name}={value!r}")
    return int(value)


def rate(name, value):
    """Returns `value` as a float in [0, 1)."""
    if not _is_number(value) or not 0 <= value < 1:
        raise ValueError(f"`{name}` must be a float in [0, 1). Received: {name}={value!r}")
    return float(value)


def finite_float(name, value, minimum=None, maximum=None, include_minimum=True, include_maximum=True):
    """Returns `value` as a float if it is finite and within the bounds given."""
    ok = _is_number(value) and math.isfinite(value)
    if ok and minimum is not None:
        ok = value >= minimum if include_minimum else value > minimum
    if ok and maximum is not None:
        ok = value <= maximum if include_maximum else value < maximum
    if not ok:
        low = "(-inf" if minimum is None else ("[" if include_minimum else "(") + f"{minimum:g}"
        high = "inf)" if maximum is None else f"{maximum:g}" + ("]" if include_maximum else ")")
        raise ValueError(f"`{name}` must be a finite number in {low}, {high}. Received: {name}={value!r}")
    return float(value)


def pair(name, value):
    """Returns an int or a pair of positive ints as a tuple `(height, width)`."""
    if is_int(value):
        value = (value, value)
    if not isinstance(value, (tuple, list)) or len(value) != 2 or not all(is_int(v) and v >= 1 for v in value):
        raise ValueError(
            f"`{name}` must be a positive integer or a pair of positive integers (height, width). "
            f"Received: {name}={value!r}"
        )
    return tuple(int(side) for side in value)


def one_of(name, value, choices):
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {tuple(choices)}. Received: {name}={value!r}")
    return value


def static_dim(value):
    """`value` as a Python int when it is known statically, else None."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
