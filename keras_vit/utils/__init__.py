"""Leaf helpers every room may use: argument checks, Keras registration, the
one adapter to Keras internals and the one atomic file writer. They import
Keras and NumPy only."""
