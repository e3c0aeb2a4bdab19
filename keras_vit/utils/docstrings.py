"""Docstrings assembled from shared parts: each argument described once.

A family of functions that share arguments (the ViT builder and its public
constructors) describes each argument in one place, an `Args:` entry of one
docstring; the others' docstrings are filled from a template with those
entries, picked by their own signatures, so a text never drifts between
copies and a signature never lacks its documentation.

Example:

>>> def add(x, y):
...     '''Adds.
...
...     Args:
...         x: a number.
...         y: another
...             number.
...     '''
>>> entries = args_entries(add)
>>> entries["y"]
'y: another\\n    number.'
>>> def twice(x):
...     pass
>>> print(render("Doubles `x`.\\n\\n{args}\\n", twice, entries))
Doubles `x`.
<BLANKLINE>
    Args:
        x: a number.
<BLANKLINE>
"""

import inspect
import re

_ENTRY = re.compile(r"    (\w+):")


def args_entries(function):
    """The `Args:` entries of `function`'s docstring, by argument name.

    Args:
        function: a function whose docstring has an `Args:` section in the
            Keras style (one `name: text` entry per argument, continuation
            lines indented further).

    Returns:
        A dict from argument name to its entry, `"name: text"`, continuation
        lines indented by four spaces.
    """
    lines = inspect.cleandoc(function.__doc__ or "").splitlines()
    if "Args:" not in lines:
        raise ValueError(f"The docstring of {function.__qualname__} has no `Args:` section.")
    entries = {}
    for line in lines[lines.index("Args:") + 1 :]:
        if line and not line.startswith(" "):
            break  # the next section
        match = _ENTRY.match(line)
        if match:
            name = match.group(1)
            entries[name] = [line[4:]]
        elif line.strip():
            entries[name].append(line[4:])
    return {name: "\n".join(entry) for name, entry in entries.items()}


def args_section(function, entries):
    """The `Args:` section of `function`: the entry of each parameter, in signature order.

    Args:
        function: the function documented.
        entries: dict from argument name to its entry (see `args_entries`).

    Returns:
        The section's text, unindented (entries indented by four spaces).
    """
    parameters = list(inspect.signature(function).parameters)
    missing = [name for name in parameters if name not in entries]
    if missing:
        raise ValueError(f"No `Args:` text for {missing} of {function.__qualname__}: add an entry for each.")
    body = "\n".join("    " + entries[name].replace("\n", "\n    ") for name in parameters)
    return f"Args:\n{body}"


def render(template, function, entries, **fields):
    """A docstring for `function`: `template` filled with `fields` and `{args}`.

    Args:
        template: str, the docstring's text without indentation; `{args}`
            stands for the `Args:` section (see `args_section`).
        function: the function documented.
        entries: dict from argument name to its entry (see `args_entries`).
        **fields: the template's other fields.

    Returns:
        The text, indented as a docstring written in the source is (every
        line but the first by four spaces), so `help()` shows it alike.
    """
    first, *rest = template.format(args=args_section(function, entries), **fields).strip().splitlines()
    return "\n".join([first, *(f"    {line}" if line else "" for line in rest)]) + "\n"
