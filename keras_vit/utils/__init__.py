"""Leaf helpers every room may use: argument checks, registration, atomic files, optional extras, docstrings and
the one adapter to Keras internals (`keras_compat`). They import Keras and NumPy at most."""
