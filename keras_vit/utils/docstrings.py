"""Docstrings filled from a template, with an `Args:` section assembled from entries written once."""

import inspect
import re


def args_entries(function):
    """The `Args:` entries of `function`'s docstring by argument name: `"name: text"`, continuation lines indented
    by four spaces."""
    lines = inspect.cleandoc(function.__doc__ or "").splitlines()
    if "Args:" not in lines:
        raise ValueError(f"The docstring of {function.__qualname__} has no `Args:` section.")
    entries = {}
    for line in lines[lines.index("Args:") + 1 :]:
        if line and not line.startswith(" "):
            break  # the next section
        match = re.match(r"    (\w+):", line)
        if match:
            name = match.group(1)
            entries[name] = [line[4:]]
        elif line.strip():
            entries[name].append(line[4:])
    return {name: "\n".join(entry) for name, entry in entries.items()}


def render(template, function, entries, **fields):
    """`template` filled with `fields` and `{args}` (the entry of each of `function`'s parameters, in order),
    indented as a docstring written in the source is, so that `help()` shows it alike."""
    parameters = list(inspect.signature(function).parameters)
    missing = [name for name in parameters if name not in entries]
    if missing:
        raise ValueError(f"No `Args:` text for {missing} of {function.__qualname__}: add an entry for each.")
    body = "\n".join("    " + entries[name].replace("\n", "\n    ") for name in parameters)
    first, *rest = template.format(args=f"Args:\n{body}", **fields).strip().splitlines()
    return "\n".join([first, *(f"    {line}" if line else "" for line in rest)]) + "\n"
