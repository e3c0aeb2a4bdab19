"""Argument checks shared by every module: one message style, one home.

Each check returns the normalised value, or raises `ValueError` that names the
argument, says what is accepted and shows what was received, in the
"Received: name=value" style of Keras's own layers. Booleans are never taken
for numbers (`True` is an `int` to Python, never a size to a user); NumPy's
integers and floats are numbers like Python's, returned as Python's.
"""

import math
import numbers

__all__ = [
    "boolean",
    "finite_float",
    "is_int",
    "one_of",
    "pair",
    "positive_int",
    "non_negative_int",
    "rate",
    "static_dim",
]


def is_int(value):
    """Whether `value` is an integer, Python's or NumPy's (`np.int64(10)`), never a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def boolean(name, value):
    """Returns `value` if it is a bool, else raises `ValueError`.

    >>> boolean("include_top", False)
    False
    """
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be True or False. Received: {name}={value!r}")
    return value


def positive_int(name, value):
    """Returns `value` if it is an int >= 1, else raises `ValueError`.

    >>> positive_int("num_heads", 12)
    12
    """
    if not is_int(value) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}")
    return int(value)


def non_negative_int(name, value):
    """Returns `value` if it is an int >= 0, else raises `ValueError`.

    >>> non_negative_int("seed", 0)
    0
    """
    if not is_int(value) or value < 0:
        raise ValueError(f"`{name}` must be an integer >= 0. Received: {name}={value!r}")
    return int(value)


def rate(name, value):
    """Returns `value` as a float if it is in [0, 1), else raises `ValueError`.

    >>> rate("dropout_rate", 0.1)
    0.1
    """
    if not _is_number(value) or not 0 <= value < 1:
        raise ValueError(f"`{name}` must be a float in [0, 1). Received: {name}={value!r}")
    return float(value)


def finite_float(name, value, minimum=None, maximum=None, include_minimum=True, include_maximum=True):
    """Returns `value` as a float if it is finite and within the bounds given.

    Args:
        name: the argument's name, for the message.
        value: the value to check.
        minimum: optional lower bound.
        maximum: optional upper bound.
        include_minimum: whether `minimum` itself is allowed.
        include_maximum: whether `maximum` itself is allowed.

    Returns:
        `float(value)`.

    >>> finite_float("learning_rate", 0.03, minimum=0, include_minimum=False)
    0.03
    """
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
    """Normalises an int or a pair of positive ints to a tuple `(height, width)`.

    >>> pair("patch_size", 16)
    (16, 16)
    """
    if is_int(value):
        value = (value, value)
    if not isinstance(value, (tuple, list)) or len(value) != 2 or not all(is_int(v) and v >= 1 for v in value):
        raise ValueError(
            f"`{name}` must be a positive integer or a pair of positive integers "
            f"(height, width). Received: {name}={value!r}"
        )
    return tuple(int(side) for side in value)


def one_of(name, value, choices):
    """Returns `value` if it is one of `choices`, else raises `ValueError`.

    >>> one_of("format", "timm", ("official", "timm", "hf"))
    'timm'
    """
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {tuple(choices)}. Received: {name}={value!r}")
    return value


def static_dim(value):
    """Returns `value` as a Python int when it is known statically, else None.

    >>> static_dim(None) is None
    True
    """
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
